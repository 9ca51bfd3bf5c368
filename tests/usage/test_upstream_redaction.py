"""Upstream redaction (issue 37): a team that turns it on sends the model the placeholders its
records keep, not the values; off, the model receives the text as written. Each call goes to a
real loopback upstream (`tests.fakes.upstream`) through the metered call chat, Compare and
batches build."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from playground.accounts.models import StoreMode
from playground.lib.redaction import Redaction
from playground.providers.adapters import ChatRequest, adapter_for
from playground.providers.models import ProviderConnection
from playground.usage.calls.call import MeteredCall
from playground.usage.calls.context import Attribution, RequestContext
from playground.usage.calls.kinds import batch_context, batch_item_call, chat_turn_call, compare_column_call
from playground.usage.calls.settlement import Alone
from playground.usage.insights.cache_breaks import Cause, SessionRequest, diagnose
from playground.usage.models import UsageRecord, UsageStatus
from playground.usage.prefix_digest import PrefixDigest
from playground.usage.redaction_salt import redaction_salt
from playground.usage.storage import REDACTOR_ERROR
from tests.fakes.upstream import FakeUpstream
from tests.gateway.conftest import KIMI
from tests.support.actors import Actors

pytestmark = pytest.mark.django_db

EMAIL, CARD = "ana.lima@example.com", "4111 1111 1111 1111"
PROMPT = f"Mail {EMAIL} the receipt for card {CARD}; {EMAIL} asked twice."
IMAGE = "data:image/png;base64,AKIAABCDEFGHIJKLMNOP" + "A" * 40  # key-shaped base64: never touched
PLACEHOLDER = re.compile(r"<(email|card):[0-9a-f]{4}>")


def _call(kind: str, actors: Actors, connection: ProviderConnection) -> MeteredCall:
    request = ChatRequest(
        model=KIMI,
        messages=[
            {"role": "system", "content": f"The customer is {EMAIL}."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": PROMPT},
                    {"type": "image_url", "image_url": {"url": IMAGE}},
                ],
            },
        ],
        max_tokens=20,
        stream=kind != "batch",
    )
    common: dict[str, Any] = {
        "adapter": adapter_for(connection),
        "request": request,
        "context_window": None,
    }
    ids: dict[str, Any] = {
        "team_id": actors.team.pk,
        "user_id": actors.owner.pk,
        "connection_id": connection.pk,
        "model_id": KIMI,
        "preset_version_id": None,
    }
    if kind == "batch":
        context = batch_context(**ids, priced_on=None, source="batch-item:7:1")
        return batch_item_call(
            **common, context=context, keep=lambda record, outcome: None, held_by_caller=False
        )
    call = (
        compare_column_call(**common, **ids, column_id=3, attempt=1)
        if kind == "compare"
        else chat_turn_call(**common, **ids, conversation_id=5)
    )
    call.settlement = Alone(lambda record, outcome: None)
    return call


def _sent_text(upstream: FakeUpstream) -> str:
    (sent,) = upstream.requests
    messages = sent.json["messages"]
    return messages[0]["content"] + " " + messages[1]["content"][0]["text"]


@pytest.mark.parametrize("kind", ["chat", "compare", "batch"])
def test_with_upstream_redaction_on_the_model_receives_the_records_placeholders(
    kind: str, actors: Actors, workers_connection: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    actors.team.upstream_redaction = True
    actors.team.store_mode = StoreMode.REDACTED
    actors.team.save()

    _call(kind, actors, workers_connection).run()

    sent = _sent_text(fake_upstream)
    assert EMAIL not in sent and CARD not in sent and CARD.replace(" ", "") not in sent
    placeholders = PLACEHOLDER.findall(sent)
    assert sorted(placeholders) == ["card", "email", "email", "email"]
    assert fake_upstream.requests[0].json["messages"][1]["content"][1]["image_url"]["url"] == IMAGE
    record = UsageRecord.objects.get()
    assert record.request_body is not None
    kept = record.request_body["messages"]
    # One salt: the record's placeholders are the very ones the model saw.
    assert kept[0]["content"] + " " + kept[1]["content"][0]["text"] == sent
    assert record.store_mode == StoreMode.REDACTED and record.redactions == {"email": 3, "card": 1}


def test_with_upstream_redaction_on_a_full_record_keeps_what_was_sent_and_counts_it(
    actors: Actors, workers_connection: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    actors.team.upstream_redaction = True
    actors.team.save()  # records keep the full text: the text as sent, which is redacted

    _call("chat", actors, workers_connection).run()

    record = UsageRecord.objects.get()
    assert EMAIL not in str(record.request_body) and EMAIL not in _sent_text(fake_upstream)
    assert record.store_mode == StoreMode.FULL and record.redactions == {"email": 3, "card": 1}


@pytest.mark.parametrize("kind", ["chat", "compare", "batch"])
def test_with_upstream_redaction_off_the_model_receives_the_text_as_written(
    kind: str, actors: Actors, workers_connection: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    actors.team.store_mode = StoreMode.REDACTED  # records redacted, the model not
    actors.team.save()

    _call(kind, actors, workers_connection).run()

    sent = _sent_text(fake_upstream)
    assert sent.count(EMAIL) == 3 and CARD in sent and not PLACEHOLDER.search(sent)
    assert EMAIL not in str(UsageRecord.objects.get().request_body)


def test_a_redactor_that_fails_sends_nothing_and_the_record_keeps_metadata_with_the_failure_counted(
    actors: Actors,
    workers_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    actors.team.upstream_redaction = True
    actors.team.save()

    def broken(self: Redaction, text: str) -> str:
        raise RuntimeError(f"choked on {text}")

    monkeypatch.setattr(Redaction, "text", broken)
    call = _call("chat", actors, workers_connection)
    answer = call.run()

    assert fake_upstream.requests == []
    record = UsageRecord.objects.get()
    assert record.status == UsageStatus.REJECTED and record.error_code == REDACTOR_ERROR
    assert "not sent" in (answer.error.message if answer.error else "").lower()
    assert record.store_mode == StoreMode.METADATA and record.request_body is None
    assert record.redactions == {REDACTOR_ERROR: 1} and record.total_cost == 0


def _turn(
    actors: Actors, connection: ProviderConnection, messages: list[dict[str, Any]], *, conversation_id: int
) -> MeteredCall:
    request = ChatRequest(
        model=KIMI, messages=messages, max_tokens=20, stream=True, affinity_key=f"pg-{conversation_id}"
    )
    call = chat_turn_call(
        adapter=adapter_for(connection),
        request=request,
        context_window=None,
        team_id=actors.team.pk,
        user_id=actors.owner.pk,
        connection_id=connection.pk,
        model_id=KIMI,
        conversation_id=conversation_id,
        preset_version_id=None,
    )
    call.settlement = Alone(lambda record, outcome: None)
    return call


def _session_request(record: UsageRecord) -> SessionRequest:
    assert record.prefix_digest is not None
    return SessionRequest(
        record_id=record.pk,
        model_id=record.model_id,
        digest=PrefixDigest.from_stored(record.prefix_digest),
        affinity_key=record.affinity_key,
        prompt_tokens=record.prompt_tokens,
        cached_tokens=record.cached_tokens,
        succeeded=True,
    )


def test_a_conversations_turns_send_the_same_placeholders_so_its_cached_prefix_holds(
    actors: Actors, workers_connection: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    """The second turn sends the first's history again: with one salt per conversation its bytes
    upstream are the first turn's up to the new messages, and the cache-break detector finds the
    prefix intact; another conversation reads the same address differently."""
    actors.team.upstream_redaction = True
    actors.team.store_mode = StoreMode.REDACTED
    actors.team.save()
    first = [{"role": "system", "content": f"The customer is {EMAIL}."}, {"role": "user", "content": PROMPT}]
    later = [*first, {"role": "assistant", "content": "Done."}, {"role": "user", "content": f"And {EMAIL}?"}]

    _turn(actors, workers_connection, first, conversation_id=5).run()
    _turn(actors, workers_connection, later, conversation_id=5).run()
    _turn(actors, workers_connection, first, conversation_id=6).run()

    one, two, other = (sent.raw for sent in fake_upstream.requests)
    history = json.dumps(fake_upstream.requests[0].json["messages"], separators=(",", ":"))[1:-1].encode()
    assert EMAIL.encode() not in one + two + other
    assert history in one  # the first turn's messages, as sent
    assert two[: one.index(history) + len(history)] == one[: one.index(history) + len(history)]
    mine, theirs = (set(re.findall(rb"<email:[0-9a-f]{4}>", body)) for body in (one, other))
    assert len(mine) == len(theirs) == 1 and mine != theirs  # one address, read per conversation
    records = list(UsageRecord.objects.filter(conversation_id=5).order_by("pk"))
    assert [record.redactions for record in records] == [{"email": 3, "card": 1}, {"email": 4, "card": 1}]
    cause, _, _ = diagnose(*map(_session_request, records))
    assert cause == Cause.EVICTED  # the prefix was intact: no section of it changed


def test_the_salt_is_the_sessions_within_a_team_and_else_the_requests_own() -> None:
    def salt(team_id: int, **fields: Any) -> bytes:
        return redaction_salt(
            RequestContext(team_id=team_id, user_id=None, connection_id=None, model_id=KIMI, **fields)
        )

    gateway_session = {"attribution": Attribution(session="s-1")}
    assert salt(1, **gateway_session) == salt(1, **gateway_session) != salt(2, **gateway_session)
    assert salt(1, affinity_key="a-1") == salt(1, affinity_key="a-1") != salt(1, affinity_key="a-2")
    assert (
        salt(1, source="batch-item:7:1")
        == salt(1, source="batch-item:7:1")
        != salt(1, source="batch-item:7:2")
    )
    assert salt(1) != salt(1)  # no session: per request


def test_with_upstream_redaction_off_a_conversations_records_keep_one_placeholder_per_value(
    actors: Actors, workers_connection: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    """The records are redacted with the conversation's salt too: the diff of two turns reads the
    same placeholder for the same value; another conversation's records read it differently."""
    actors.team.store_mode = StoreMode.REDACTED
    actors.team.save()
    turn = [{"role": "user", "content": f"Mail {EMAIL}."}]

    for conversation_id in (5, 5, 6):
        _turn(actors, workers_connection, turn, conversation_id=conversation_id).run()

    kept = [str(record.request_body) for record in UsageRecord.objects.order_by("pk")]
    assert all(sent.json and EMAIL in str(sent.json) for sent in fake_upstream.requests)  # sent as written
    one, two, other = (re.findall(r"<email:[0-9a-f]{4}>", body) for body in kept)
    assert one == two != other and len(one) == 1
