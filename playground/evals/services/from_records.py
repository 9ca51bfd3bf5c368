"""Dataset items from the request log: each selected record's body as it was stored.

A record keeps the request it sent (`UsageRecord.request_body`), not the answer, so an item made
from it has the request's messages (and the prompt variables it was sent with) and no expected
output. The body is taken as stored: a redacted one goes in with its placeholders (the item's
metadata and the version's note say so); a record that kept metadata only, or whose text the
team's retention removed, has nothing to add and is refused with that reason, as is one whose
messages an item cannot carry (an image, a tool call). Records are looked up in one team only:
another team's request id is refused like an unknown one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from playground.accounts.models import StoreMode
from playground.evals.models import Dataset, DatasetVersion
from playground.evals.services.datasets import DatasetNotFound, dataset_create, dataset_items_add
from playground.evals.uploads import ROLES, ItemFields, item_fields
from playground.usage.models import UsageRecord

MAX_RECORDS = 200  # four pages of the log


@dataclass(frozen=True)
class RecordLine:
    """One selected request id: the item it makes, or why it cannot make one."""

    request_id: str
    record: UsageRecord | None
    fields: ItemFields | None
    refused: str = ""

    @property
    def redacted(self) -> bool:
        return self.record is not None and self.record.store_mode == StoreMode.REDACTED


@dataclass(frozen=True)
class Added:
    dataset: Dataset
    version: DatasetVersion
    lines: list[RecordLine]

    @property
    def count(self) -> int:
        return sum(not line.refused for line in self.lines)

    @property
    def refused(self) -> list[RecordLine]:
        return [line for line in self.lines if line.refused]


def record_lines(*, team_id: int, request_ids: Iterable[str]) -> list[RecordLine]:
    """Each distinct id in the order given, with its record of `team_id` and what it makes."""
    ids = list(dict.fromkeys(request_id.strip() for request_id in request_ids if request_id.strip()))
    if len(ids) > MAX_RECORDS:
        raise ValidationError(f"Select at most {MAX_RECORDS} requests at a time ({len(ids)} selected).")
    valid = {request_id: _uuid(request_id) for request_id in ids}
    records = {
        str(record.request_id): record
        for record in UsageRecord.objects.filter(
            team_id=team_id, request_id__in=[value for value in valid.values() if value]
        ).only(
            "request_id",
            "team_id",
            "model_id",
            "created_at",
            "request_body",
            "variables",
            "store_mode",
            "redactions",
            "body_removed_by",
            "body_removed_at",
        )
    }
    lines = []
    for request_id in ids:
        value = valid[request_id]
        record = records.get(str(value)) if value else None
        if record is None:
            lines.append(RecordLine(request_id, None, None, "No request with this id in the team's log."))
            continue
        made = record_item_fields(record)
        if isinstance(made, str):
            lines.append(RecordLine(request_id, record, None, made))
        else:
            lines.append(RecordLine(request_id, record, made))
    return lines


def record_item_fields(record: UsageRecord) -> ItemFields | str:
    """The item a record's stored body makes, or why it makes none."""
    body = record.request_body
    if body is None:
        if record.body_removed_by:
            day = record.body_removed_at.date() if record.body_removed_at else "an earlier day"
            return f"Its text was removed on {day} by the team's retention: nothing to add."
        if record.store_mode == StoreMode.METADATA:
            return "The record keeps metadata only (no prompt text): nothing to add."
        return "The record has no request body stored: nothing to add."
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "The stored body has no chat messages to add."
    plain = []
    for position, message in enumerate(messages):
        text = _message_text(message)
        if text is None:
            return f"Message {position + 1} holds an image or a tool call: items carry text only."
        role = message.get("role")
        if role not in ROLES:
            return f"Message {position + 1} is a {role!r} message: items carry {', '.join(ROLES)} messages."
        plain.append({"role": role, "content": text})
    metadata: dict[str, Any] = {"request_id": str(record.request_id), "model": record.model_id}
    if record.store_mode == StoreMode.REDACTED:
        metadata["redacted"] = record.redactions or {}
    fields = item_fields({"messages": plain, "variables": record.variables or {}, "metadata": metadata})
    return fields if isinstance(fields, ItemFields) else f"The stored body cannot be an item: {fields}"


def dataset_add_records(
    *, user: User, team_id: int, request_ids: Iterable[str], dataset_id: int | None = None, new_name: str = ""
) -> Added:
    """The records that make items, as the next version of dataset `dataset_id` of `team_id` (or of
    a new dataset named `new_name`). Refused lines are reported, not added; with no line to add,
    nothing is written (`ValidationError`). `DatasetNotFound` for a dataset outside the team."""
    lines = record_lines(team_id=team_id, request_ids=request_ids)
    good = [line for line in lines if line.fields is not None]
    if not good:
        raise ValidationError("None of the selected requests can be added:" + _reasons(lines))
    redacted = sum(line.redacted for line in good)
    note = f", {redacted} redacted (placeholders kept)" if redacted else ""
    skipped = len(lines) - len(good)
    refused = f", {skipped} refused" if skipped else ""
    with transaction.atomic():  # a new dataset is not left empty when the add is refused
        if dataset_id is None:
            dataset = dataset_create(user=user, team_id=team_id, name=new_name)
        else:
            found = Dataset.objects.filter(pk=dataset_id, team_id=team_id).first()
            if found is None:
                raise DatasetNotFound(dataset_id)
            dataset = found
        version = dataset_items_add(
            user=user,
            dataset_id=dataset.pk,
            items=[line.fields for line in good if line.fields is not None],
            change=f"Added {len(good)} request(s) from the log{note}{refused}",
        )
    return Added(dataset=dataset, version=version, lines=lines)


def _message_text(message: Any) -> str | None:
    """A message's text: its content as text, or its text parts joined; None for anything else."""
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if isinstance(content, str):
        return None if message.get("tool_calls") else content
    if isinstance(content, list) and all(
        isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
        for part in content
    ):
        return "\n".join(part["text"] for part in content)
    return None


def _reasons(lines: list[RecordLine]) -> str:
    return "".join(f" {line.request_id}: {line.refused}" for line in lines if line.refused)


def _uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None
