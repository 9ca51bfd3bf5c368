"""Scores by preset version: the dashboard's mean rating and thumbs-up share of each version
whose records were scored in the period (`usage.models.Score`).

Read from the scores, never the records: each score carries its record's time and preset
version, so the period is a range of the scores' (team, record time) index. A filter beyond the
period (model, user, path...) narrows them to the records the request log would list
(`request_log.log_records`), looked up by the records' primary key, one per score.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.db.models import Count, Exists, OuterRef, Q, Sum

from playground.analytics.filters import Filters
from playground.analytics.selectors.request_log import log_records
from playground.presets.selectors import preset_version_labels
from playground.usage.models import Score, ScoreKind

TOP_VERSIONS = 12
NO_VERSION = "No preset version"
THUMBS, RATING = Q(kind=ScoreKind.THUMBS), Q(kind=ScoreKind.RATING)


def _narrowed(filters: Filters) -> bool:
    """Whether a filter beyond the team and the period is chosen (the chart's choices aside)."""
    return replace(filters, group="model", sort="newest") != Filters(team=filters.team, period=filters.period)


def scores_by_preset_version(filters: Filters, *, top: int = TOP_VERSIONS) -> list[dict[str, Any]]:
    """[{key, label, scores, thumbs, thumbs_up, up_share, ratings, rating_sum, rating_mean}], the
    most scored versions first (records naming no version are one row, key None). `up_share` is
    thumbs up / thumbs, `rating_mean` the mean of the 1-5 ratings; None when there are none."""
    period = filters.period
    scores = Score.objects.filter(
        team=filters.team, record_created_at__gte=period.start, record_created_at__lt=period.end
    )
    if _narrowed(filters):
        scores = scores.filter(Exists(log_records(filters).filter(pk=OuterRef("record_id"))))
    rows = list(
        scores.values("preset_version_id")
        .annotate(
            n_scores=Count("id"),
            n_thumbs=Count("id", filter=THUMBS),
            n_up=Count("id", filter=THUMBS & Q(value=1)),
            n_ratings=Count("id", filter=RATING),
            n_rating_sum=Sum("value", filter=RATING),
        )
        .order_by("-n_scores", "preset_version_id")[:top]
    )
    labels = preset_version_labels(
        team_id=filters.team.pk, ids=[row["preset_version_id"] for row in rows if row["preset_version_id"]]
    )
    return [
        {
            "key": row["preset_version_id"],
            "label": _label(row["preset_version_id"], labels),
            "scores": row["n_scores"],
            "thumbs": row["n_thumbs"],
            "thumbs_up": row["n_up"],
            "up_share": row["n_up"] / row["n_thumbs"] if row["n_thumbs"] else None,
            "ratings": row["n_ratings"],
            "rating_sum": row["n_rating_sum"] or 0,
            "rating_mean": (row["n_rating_sum"] or 0) / row["n_ratings"] if row["n_ratings"] else None,
        }
        for row in rows
    ]


def _label(version_id: int | None, labels: dict[int, str]) -> str:
    if version_id is None:
        return NO_VERSION
    return labels.get(version_id, f"Preset version #{version_id} (deleted)")
