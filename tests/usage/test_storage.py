"""Storage modes: which applies, and what the one record writer keeps of a request's text."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from playground.accounts.models import StoreMode
from playground.catalog.seed import ENGINE_MODEL_ID
from playground.lib.redaction import Redaction
from playground.providers.events import Finish, TextDelta, UpstreamError
from playground.usage.calls.context import RequestContext
from playground.usage.insights.cache_break_diff import section_diff
from playground.usage.insights.cache_breaks import Cause
from playground.usage.metering import UsageMeter
from playground.usage.models import UsageRecord
from playground.usage.prefix_digest import prefix_digest
from playground.usage.records import usage_record_create, usage_records_create_many
from playground.usage.storage import REDACTOR_ERROR, record_text_kept, store_mode_applied

EMAIL, CARD = "ana.lima@example.com", "4111 1111 1111 1111"
BODY = {
    "model": ENGINE_MODEL_ID,
    "messages": [
        {"role": "system", "content": f"Customer: {EMAIL}"},
        {"role": "user", "content": f"Charge {CARD}, then mail {EMAIL}."},
    ],
}


@pytest.mark.parametrize(
    ("configured", "asked", "applied"),
    [
        ("full", "", "full"),
        ("full", "redacted", "redacted"),
        ("full", "metadata", "metadata"),
        ("redacted", "metadata", "metadata"),
        ("redacted", "full", "redacted"),  # asks for more: not given
        ("metadata", "full", "metadata"),
        ("metadata", "redacted", "metadata"),
    ],
)
def test_a_request_asks_for_less_never_more(configured: str, asked: str, applied: str) -> None:
    assert store_mode_applied(configured, asked) == applied


def _record(actors: Any, *, store: str = "", error: str = "", **overrides: Any) -> UsageRecord:
    meter = UsageMeter(prompt_chars=100)
    if error:
        meter.observe(UpstreamError(error, code="bad_request", http_status=400))
    else:
        meter.observe(TextDelta("ok"))
        meter.observe(Finish("stop"))
    context = RequestContext(
        team_id=actors.team.pk,
        user_id=actors.owner.pk,
        connection_id=None,
        model_id=ENGINE_MODEL_ID,
        request_body=BODY,
        variables={"customer": EMAIL},
        store=store,
        **overrides,
    )
    usage_record_create(context=context, outcome=meter.outcome())
    return UsageRecord.objects.get()


@pytest.mark.django_db
def test_a_full_record_keeps_the_text_as_sent(actors: Any) -> None:
    record = _record(actors)  # the team's mode: full by default

    assert record.store_mode == StoreMode.FULL and record.redactions is None
    assert record.request_body == BODY and record.variables == {"customer": EMAIL}


@pytest.mark.django_db
def test_a_redacted_team_keeps_placeholders_counts_and_the_digests_of_the_text_as_sent(actors: Any) -> None:
    actors.team.store_mode = StoreMode.REDACTED
    actors.team.save()

    record = _record(actors)

    text = str(record.request_body) + str(record.variables)
    assert EMAIL not in text and CARD not in text
    assert record.store_mode == StoreMode.REDACTED
    assert record.redactions == {"email": 3, "card": 1}
    assert record.request_body is not None
    system, user = (message["content"] for message in record.request_body["messages"])
    placeholder = system.removeprefix("Customer: ")
    assert placeholder.startswith("<email:") and user.endswith(f"mail {placeholder}.")
    assert record.variables == {"customer": placeholder}
    digest = prefix_digest(BODY)
    assert digest is not None and record.prefix_digest == digest.stored()


@pytest.mark.django_db
def test_a_metadata_record_keeps_no_text_but_its_error_redacted(actors: Any) -> None:
    record = _record(actors, store=StoreMode.METADATA, error=f"Unknown recipient {EMAIL}")

    assert record.store_mode == StoreMode.METADATA
    assert record.request_body is None and record.variables is None
    assert EMAIL not in record.error_text and "<email:" in record.error_text
    assert record.redactions == {"email": 1}
    assert record.prefix_digest is not None and record.error_code == "bad_request"


@pytest.mark.django_db
def test_a_request_context_store_overrides_the_team(actors: Any) -> None:
    record = _record(actors, store=StoreMode.REDACTED)  # a gateway key's mode, say

    assert record.store_mode == StoreMode.REDACTED and EMAIL not in str(record.request_body)


@pytest.mark.django_db
def test_a_redactor_that_fails_keeps_the_record_as_metadata_and_counts_it(
    actors: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(self: Redaction, text: str) -> str:
        raise ValueError(f"could not read {text}")

    monkeypatch.setattr(Redaction, "text", broken)

    with caplog.at_level(logging.ERROR):
        record = _record(actors, store=StoreMode.REDACTED, error=f"Unknown recipient {EMAIL}")

    assert record.store_mode == StoreMode.METADATA
    assert record.redactions == {REDACTOR_ERROR: 1}
    assert record.request_body is None and record.variables is None
    assert EMAIL not in record.error_text and record.error_code == "bad_request"
    assert record.prefix_digest is not None and record.http_status == 400  # the record itself, whole
    assert EMAIL not in caplog.text and "ValueError" in caplog.text


def test_schema_errors_keep_redacted_messages_or_none() -> None:
    errors = [{"path": "$.contact", "message": f"'{EMAIL}' is not of type 'integer'"}]

    redacted = record_text_kept(
        mode=StoreMode.REDACTED, request_body=None, variables=None, error_text="", schema_errors=errors
    )
    metadata = record_text_kept(
        mode=StoreMode.METADATA, request_body=None, variables=None, error_text="", schema_errors=errors
    )

    assert redacted.schema_errors is not None and EMAIL not in redacted.schema_errors[0]["message"]
    assert redacted.schema_errors[0]["message"].endswith("is not of type 'integer'")
    assert metadata.schema_errors == [{"path": "$.contact", "message": ""}]


def test_a_diff_of_redacted_bodies_compares_placeholders_without_their_salts() -> None:
    """Each record has its own salt: unsalted, the first message (same address, other digits)
    is no change, and the diff stops at the message that did change."""
    first = {"content": f"I am {EMAIL}"}
    before, after = (
        Redaction().value({"messages": [first, {"role": "user", "content": question}]})
        for question in ("Where is order 7?", "Where is order 8?")
    )
    assert before["messages"][0] != after["messages"][0]

    lines = section_diff(Cause.HISTORY_CHANGED, before, after, redacted=True)

    changed = [line.text for line in lines if line.kind in "+-"]
    assert changed == ['    "content": "Where is order 7?",', '    "content": "Where is order 8?",']


@pytest.mark.django_db(transaction=True)
def test_records_written_together_read_their_teams_mode_once_and_redact_each(actors: Any) -> None:
    actors.team.store_mode = StoreMode.REDACTED
    actors.team.save(update_fields=["store_mode"])
    meter = UsageMeter(prompt_chars=100)
    meter.observe(TextDelta("ok"))
    meter.observe(Finish("stop"))
    context = RequestContext(
        team_id=actors.team.pk,
        user_id=actors.owner.pk,
        connection_id=None,
        model_id=ENGINE_MODEL_ID,
        request_body=BODY,
        variables={"customer": EMAIL},
    )

    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        records = usage_records_create_many([(context, meter.outcome())] * 5)

    team_reads = [
        q["sql"] for q in queries.captured_queries if '"store_mode"' in q["sql"] and "SELECT" in q["sql"]
    ]
    assert len(team_reads) == 1
    assert {record.store_mode for record in records} == {StoreMode.REDACTED}
    assert all(EMAIL not in str(record.variables) for record in records)
