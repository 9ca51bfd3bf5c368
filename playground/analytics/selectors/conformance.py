"""Schema conformance: how many structured answers held to the JSON format they were asked for,
by model, schema name and preset version, with the paths where the others broke it.

Read from the records (the rollups hold no schema), narrowed by every filter the request log
takes (`request_log.log_records`), and only those the writer judged (`schema_valid` set: a whole
answer to a request that asked for a JSON response format), which a partial index keeps cheap.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from django.db.models import Count, Q

from playground.analytics.filters import Filters
from playground.analytics.selectors.request_log import log_records
from playground.presets.selectors import preset_version_labels

TOP_ERROR_PATHS = 3
# Error paths are counted over the latest this many invalid answers of the period, at most.
ERROR_PATHS_FROM = 20_000


@dataclass(frozen=True)
class ConformanceRow:
    model_id: str
    schema_name: str  # "" for a bare schema, which has no name; "json_object" for any JSON object
    preset_version_id: int | None
    preset_label: str  # "" without a preset
    answers: int
    valid: int
    error_paths: list[tuple[str, int]]  # the commonest, with how many invalid answers broke there

    @property
    def share_valid(self) -> float:
        return self.valid / self.answers


@dataclass(frozen=True)
class Conformance:
    rows: list[ConformanceRow]  # the most answers first
    # Set when the period has more invalid answers than ERROR_PATHS_FROM: the paths are theirs.
    paths_sampled: bool


def schema_conformance(filters: Filters) -> Conformance:
    judged = log_records(filters).filter(schema_valid__isnull=False).order_by()
    groups = list(
        judged.values("model_id", "schema_name", "preset_version_id")
        .annotate(answers=Count("id"), valid=Count("id", filter=Q(schema_valid=True)))
        .order_by("-answers", "model_id", "schema_name", "preset_version_id")
    )
    invalid = (
        judged.filter(schema_valid=False)
        .order_by("-created_at", "-id")
        .values_list("model_id", "schema_name", "preset_version_id", "schema_errors")[: ERROR_PATHS_FROM + 1]
    )
    paths: dict[tuple[str, str, int | None], Counter[str]] = {}
    read = 0
    for model_id, schema_name, version_id, errors in invalid.iterator(chunk_size=2000):
        read += 1
        if read > ERROR_PATHS_FROM:
            break
        broken = {error.get("path", "$") for error in errors or [] if isinstance(error, dict)}
        paths.setdefault((model_id, schema_name, version_id), Counter()).update(broken)
    labels = preset_version_labels(
        team_id=filters.team.pk, ids=[g["preset_version_id"] for g in groups if g["preset_version_id"]]
    )
    rows = [
        ConformanceRow(
            model_id=group["model_id"],
            schema_name=group["schema_name"],
            preset_version_id=group["preset_version_id"],
            preset_label=_preset_label(group["preset_version_id"], labels),
            answers=group["answers"],
            valid=group["valid"],
            error_paths=_commonest(
                paths.get((group["model_id"], group["schema_name"], group["preset_version_id"]))
            ),
        )
        for group in groups
    ]
    return Conformance(rows=rows, paths_sampled=read > ERROR_PATHS_FROM)


def _preset_label(version_id: int | None, labels: dict[int, str]) -> str:
    if version_id is None:
        return ""
    return labels.get(version_id, f"Preset version #{version_id}")


def _commonest(counts: Counter[str] | None) -> list[tuple[str, int]]:
    """The most frequent paths, ties by path, so the order does not depend on the scan."""
    if not counts:
        return []
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:TOP_ERROR_PATHS]
