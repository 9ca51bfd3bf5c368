"""The gateway's rankings: cost by API key and by end user over the period, from the rollups by key
and end user (`rollups.attribution_rows`), never the records.

Each returns the top few by cost, and the rest summed into one "other" row, so a team with
thousands of end users still gets a chart of a dozen bars whose total is the period's.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, QuerySet, Sum

from playground.analytics.filters import Filters
from playground.analytics.selectors.rollups import attribution_rows, usd
from playground.usage.models import ApiKey

TOP = 8
SUMS = ("requests", "prompt_tokens", "cached_tokens", "completion_tokens")


def cost_by_key(filters: Filters, *, top: int = TOP) -> list[dict[str, Any]]:
    """[{key, label, detail, requests, prompt_tokens, cached_tokens, completion_tokens, cost}], the
    costliest keys first, then "other" (key None) when more keys spent in the period."""
    ranked = _ranked(attribution_rows(filters), "api_key_id", top=top, noun=("other key", "other keys"))
    keys = {
        key.pk: key for key in ApiKey.objects.filter(team=filters.team, pk__in=[row["key"] for row in ranked])
    }
    for row in ranked:
        key = keys.get(row["key"])
        if key is not None:
            row["label"], row["detail"] = key.name, f"{key.prefix}…"
        elif row["key"] is not None:
            row["label"] = "(deleted key)"
    return ranked


def cost_by_end_user(filters: Filters, *, top: int = TOP) -> list[dict[str, Any]]:
    """As `cost_by_key`, by the end user the requests named ("(no end user)" for none)."""
    rows = attribution_rows(filters, by_end_user=True)
    ranked = _ranked(rows, "end_user", top=top, noun=("other end user", "other end users"))
    for row in ranked:
        if row["key"] == "":
            row["label"] = "(no end user)"
    return ranked


def _ranked(rows: QuerySet[Any], column: str, *, top: int, noun: tuple[str, str]) -> list[dict[str, Any]]:
    # Annotations may not reuse a column's name ("requests"): `n_<measure>` here.
    sums = {f"n_{name}": Sum(name) for name in SUMS} | {"n_cost": Sum("total_cost_e10")}
    best = list(rows.values(column).annotate(**sums).order_by("-n_cost", column)[:top])
    ranked = [_row(row, key=row[column], label=str(row[column])) for row in best]
    if len(best) < top:
        return ranked
    whole = rows.aggregate(**sums, groups=Count(column, distinct=True))
    others = whole["groups"] - len(best)
    if others > 0:
        rest = {name: whole[name] - sum(row[name] for row in best) for name in sums}
        ranked.append(_row(rest, key=None, label=f"{others:,} {noun[others != 1]}"))
    return ranked


def _row(sums: dict[str, Any], *, key: Any, label: str) -> dict[str, Any]:
    return {
        "key": key,
        "label": label,
        "detail": "",
        **{name: sums[f"n_{name}"] or 0 for name in SUMS},
        "cost": usd(sums["n_cost"]),
    }
