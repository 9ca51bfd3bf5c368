"""Scores on usage records: giving one (a person on the record page, an application through the
gateway) and reading a record's or a page of records' (`models.Score`).

Every function is scoped to a team: a key scores only its own team's records, a person only the
records of a team they belong to (the caller looked the record up that way), so another team's
record is never found, never scored and never told apart from one that does not exist.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from playground.lib.storable import is_storable
from playground.usage.models import (
    COMMENT_MAX,
    NAME_MAX,
    RATING_MAX,
    RATING_MIN,
    ApiKey,
    Score,
    ScoreKind,
    ScoreOrigin,
    UsageRecord,
)


class RecordNotFound(Exception):
    """No record with this request id in the team (it may exist in another: we do not say)."""


@dataclass(frozen=True)
class ScoreInput:
    """A score as given, checked by `score_input` before anything is written."""

    kind: str
    value: int
    comment: str = ""
    name: str = ""


def score_input(*, kind: object, value: object, comment: object = "", name: object = "") -> ScoreInput:
    """The score, or a `ValidationError` whose messages (by field) say what is wrong."""
    errors: dict[str, str] = {}
    if kind not in ScoreKind.values:
        errors["kind"] = f"kind must be one of {', '.join(repr(k) for k in ScoreKind.values)}."
    number = _value(kind, value)
    if number is None and "kind" not in errors:
        errors["value"] = (
            "value must be 1 (up) or 0 (down) for kind 'thumbs' (true and false too)."
            if kind == ScoreKind.THUMBS
            else f"value must be an integer from {RATING_MIN} to {RATING_MAX} for kind 'rating'."
        )
    for field, text, limit in (("comment", comment, COMMENT_MAX), ("name", name, NAME_MAX)):
        if not isinstance(text, str):
            errors[field] = f"{field} must be a string."
        elif len(text) > limit:
            errors[field] = f"{field} is {len(text):,} characters: at most {limit:,}."
        elif not is_storable(text):
            errors[field] = f"{field} holds a NUL or a lone surrogate, which cannot be stored."
    if errors:
        raise ValidationError(errors)
    assert number is not None and isinstance(kind, str) and isinstance(comment, str) and isinstance(name, str)
    return ScoreInput(kind=kind, value=number, comment=comment.strip(), name=name.strip())


def _value(kind: object, value: object) -> int | None:
    if kind == ScoreKind.THUMBS:
        if isinstance(value, bool):
            return int(value)
        return value if isinstance(value, int) and value in (0, 1) else None
    if isinstance(value, int) and not isinstance(value, bool) and RATING_MIN <= value <= RATING_MAX:
        return value
    return None


def score_put_by_key(*, key: ApiKey, request_id: str, given: ScoreInput) -> tuple[Score, bool]:
    """The key's score named `given.name` on its team's record, made or replaced; and whether it
    was made. `RecordNotFound` for an id no record of the key's team has."""
    try:
        wanted = uuid.UUID(request_id)
    except ValueError:
        raise RecordNotFound from None
    record = (
        UsageRecord.objects.filter(team_id=key.team_id, request_id=wanted)
        .only("pk", "team_id", "preset_version_id", "created_at")
        .first()
    )
    if record is None:
        raise RecordNotFound
    return _put(record, given, origin=ScoreOrigin.API, api_key=key, name=given.name)


def score_put_by_person(*, user_id: int, record: UsageRecord, given: ScoreInput) -> Score:
    """The person's one score on the record (a record of their team: the caller looked it up
    so), made or replaced."""
    score, _ = _put(record, given, origin=ScoreOrigin.PERSON, user_id=user_id, name="")
    return score


def score_delete_by_person(*, user_id: int, record: UsageRecord) -> bool:
    """Take back the person's score on the record; whether there was one."""
    deleted, _ = Score.objects.filter(record=record, origin=ScoreOrigin.PERSON, user_id=user_id).delete()
    return deleted > 0


def _put(record: UsageRecord, given: ScoreInput, *, origin: str, name: str, **who: Any) -> tuple[Score, bool]:
    values = {"kind": given.kind, "value": given.value, "comment": given.comment}
    lookup: dict[str, Any] = {
        "team_id": record.team_id,
        "record": record,
        "origin": origin,
        "name": name,
        **who,
    }
    defaults = {
        **values,
        "preset_version_id": record.preset_version_id,
        "record_created_at": record.created_at,
    }
    try:
        with transaction.atomic():
            return Score.objects.update_or_create(**lookup, defaults=defaults)
    except IntegrityError:  # two first scores at once: the other made the row, this one replaces it
        return Score.objects.update_or_create(**lookup, defaults=defaults)


def record_scores(*, record: UsageRecord) -> list[Score]:
    """A record's scores, oldest first, with who gave them."""
    return list(Score.objects.filter(record=record).select_related("user", "api_key"))


@dataclass(frozen=True)
class ScoreSummary:
    """What a page of the request log shows of a record's scores."""

    up: int = 0
    down: int = 0
    ratings: int = 0
    rating_sum: int = 0

    @property
    def rating_mean(self) -> float | None:
        return self.rating_sum / self.ratings if self.ratings else None


def score_summaries(*, team_id: int, record_ids: Iterable[int]) -> dict[int, ScoreSummary]:
    """{record id: its scores summed} for the records that have any (one query, by record)."""
    sums: dict[int, ScoreSummary] = {}
    rows = Score.objects.filter(team_id=team_id, record_id__in=list(record_ids)).values_list(
        "record_id", "kind", "value"
    )
    for record_id, kind, value in rows:
        was = sums.get(record_id, ScoreSummary())
        if kind == ScoreKind.THUMBS:
            was = ScoreSummary(was.up + value, was.down + (1 - value), was.ratings, was.rating_sum)
        else:
            was = ScoreSummary(was.up, was.down, was.ratings + 1, was.rating_sum + value)
        sums[record_id] = was
    return sums
