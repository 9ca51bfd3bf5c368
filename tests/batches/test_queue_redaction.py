"""Upstream redaction on the queue path (issue 37): a queued Workers AI batch goes upstream outside
the metered call, so it is redacted as it is submitted, with the salt its records are written
with; the loopback Workers AI server sees the placeholders the records keep, never the values."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.utils import timezone

from playground.accounts.models import StoreMode
from playground.batches.models import Batch, BatchItem, BatchSubmission, ItemState
from playground.batches.services.queue_results import queue_reference
from playground.batches.services.step import batch_step_run
from playground.lib.redaction import Redaction
from playground.providers.models import ProviderConnection
from playground.usage.models import UsageRecord
from playground.usage.storage import REDACTOR_ERROR
from tests.fakes.upstream import FakeUpstream, chat_completion, envelope, json_reply, usage
from tests.support.actors import Actors

pytestmark = pytest.mark.django_db

EMAILS = ("ana.lima@example.com", "bo.chen@example.org")
PLACEHOLDER = re.compile(r"<email:[0-9a-f]{4}>")


def _rows() -> list[dict[str, Any]]:
    return [
        {"messages": [{"role": "user", "content": f"Write to {email}, then to {email} again."}]}
        for email in EMAILS
    ]


def _step(batch: Batch) -> None:
    batch.refresh_from_db()
    batch_step_run(batch_id=batch.pk, token=batch.chain_token)


def _queued() -> Any:
    return json_reply(envelope({"status": "queued", "request_id": "req-1", "model": "m"}))


def _results(batch: Batch) -> Any:
    responses = [
        {
            "id": item.position,
            "external_reference": queue_reference(item),
            "result": chat_completion("Done.", usage_body=usage(12, 2)),
            "success": True,
        }
        for item in batch.items.order_by("index")
    ]
    return json_reply(envelope({"responses": responses, "usage": usage(1, 1)}))


def _submit_and_record(batch: Batch, fake_upstream: FakeUpstream) -> list[str]:
    """The texts the queue received; the results are then polled and recorded."""
    fake_upstream.script(_queued())
    _step(batch)
    (submitted,) = [sent for sent in fake_upstream.requests if sent.json and "requests" in sent.json]
    assert submitted.json is not None
    BatchSubmission.objects.update(next_poll_at=timezone.now() - dt.timedelta(seconds=1))
    fake_upstream.script(_results(batch))
    _step(batch)
    return [body["messages"][0]["content"] for body in submitted.json["requests"]]


def test_with_upstream_redaction_on_the_queue_receives_the_placeholders_the_records_keep(
    actors: Actors,
    workers_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    running_batch: Callable[..., Batch],
) -> None:
    actors.team.upstream_redaction = True
    actors.team.store_mode = StoreMode.REDACTED
    actors.team.save()
    batch = running_batch(workers_connection, _rows())

    sent = _submit_and_record(batch, fake_upstream)

    assert not any(email in text for email in EMAILS for text in sent)
    assert [len(set(PLACEHOLDER.findall(text))) for text in sent] == [1, 1]  # a value, one placeholder
    assert PLACEHOLDER.findall(sent[0]) != PLACEHOLDER.findall(sent[1])  # each item its own salt
    records = [
        item.usage_record for item in BatchItem.objects.order_by("index").select_related("usage_record")
    ]
    assert all(record is not None for record in records)
    kept = [
        record.request_body["messages"][0]["content"] for record in records if record and record.request_body
    ]
    assert kept == sent  # the records' placeholders are the very ones the queue received
    assert [record.redactions for record in records if record] == [{"email": 2}, {"email": 2}]


def test_with_upstream_redaction_off_the_queue_receives_the_text_as_written(
    actors: Actors,
    workers_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    running_batch: Callable[..., Batch],
) -> None:
    actors.team.store_mode = StoreMode.REDACTED
    actors.team.save()
    batch = running_batch(workers_connection, _rows())

    sent = _submit_and_record(batch, fake_upstream)

    assert [text.count(email) for text, email in zip(sent, EMAILS, strict=True)] == [2, 2]
    assert not any(
        email in str(record.request_body) for record in UsageRecord.objects.all() for email in EMAILS
    )


def test_an_item_the_redactor_fails_on_is_not_queued(
    actors: Actors,
    workers_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    running_batch: Callable[..., Batch],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    actors.team.upstream_redaction = True
    actors.team.save()
    batch = running_batch(workers_connection, _rows()[:1])

    def broken(self: Redaction, text: str) -> str:
        raise RuntimeError(f"choked on {text}")

    monkeypatch.setattr(Redaction, "text", broken)
    _step(batch)

    assert fake_upstream.requests == []
    item = BatchItem.objects.get()
    assert item.state == ItemState.FAILED and item.error_code == REDACTOR_ERROR
