"""The gateway's rankings: cost by API key and by end user over the period, from the rollups by key
and end user (`rollups.attribution_rows`), never the records.

Each returns the top few by cost, and the rest summed into one "other" row, so a team with
thousands of end users still gets a chart of a dozen bars whose total is the period's. At 10 M
records (20,000 end users, ~120 k day rows in 90 days) the 90-day ranking of end users took
297-629 ms (p50, three runs on two busy cores) when it summed every column of those rows and
then counted them distinct; summing one column once and the rest for eight end users
(`_ranked`) took 83-168 ms in the same runs.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, QuerySet, Sum, Window

from playground.analytics.filters import Filters
from playground.analytics.selectors.rollups import attribution_rows, usd
from playground.usage.models import ApiKey

TOP = 8
SUMS = ("requests", "prompt_tokens", "cached_tokens", "completion_tokens")


def cost_by_key(filters: Filters, *, top: int = TOP) -> list[dict[str, Any]]:
    """[{key, label, detail, requests, prompt_tokens, cached_tokens, completion_tokens, cost}], the
    costliest keys first, then "other" (key None) when more keys spent in the period."""
    rows = attribution_rows(filters)
    ranked = _ranked(rows, "api_key_id", whole=rows, top=top, noun=("other key", "other keys"))
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
    # The period's sums over every end user are the key tables' (far fewer rows to add up).
    whole = attribution_rows(filters)
    ranked = _ranked(rows, "end_user", whole=whole, top=top, noun=("other end user", "other end users"))
    for row in ranked:
        if row["key"] == "":
            row["label"] = "(no end user)"
    return ranked


def _ranked(
    rows: QuerySet[Any], column: str, *, whole: QuerySet[Any], top: int, noun: tuple[str, str]
) -> list[dict[str, Any]]:
    """The top `top` values of `column` by cost, and the rest summed from `whole` (the same
    requests in a table as small as can hold them).

    Three queries, so that the one that reads every row of the period sums one column: the top
    by cost with the number of values (a window over the groups), then the other sums of those
    few through their index, then the period's sums."""
    best = list(
        rows.values(column)
        .annotate(n_cost=Sum("total_cost_e10"), groups=Window(Count("*")))
        .order_by("-n_cost", column)[:top]
    )
    if not best:
        return []
    chosen = [row[column] for row in best]
    sums = {
        row[column]: row
        for row in rows.filter(**{f"{column}__in": chosen}).values(column).annotate(**_SUMS).order_by()
    }
    ranked = [_row(sums[value], key=value, label=str(value)) for value in chosen]
    others = best[0]["groups"] - len(best)
    if others > 0:
        total = whole.aggregate(**_SUMS)
        rest = {name: (total[name] or 0) - sum(sums[value][name] for value in chosen) for name in _SUMS}
        ranked.append(_row(rest, key=None, label=f"{others:,} {noun[others != 1]}"))
    return ranked


# Annotations may not reuse a column's name ("requests"): `n_<measure>` here.
_SUMS = {f"n_{name}": Sum(name) for name in SUMS} | {"n_cost": Sum("total_cost_e10")}


def _row(sums: dict[str, Any], *, key: Any, label: str) -> dict[str, Any]:
    return {
        "key": key,
        "label": label,
        "detail": "",
        **{name: sums[f"n_{name}"] or 0 for name in SUMS},
        "cost": usd(sums["n_cost"]),
    }
