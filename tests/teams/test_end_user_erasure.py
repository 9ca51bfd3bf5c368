"""Erasing one end user (issue 37): a planted end user across the gateway's, the chat's and a
batch's records, the end-user rollups, chat messages, batch items and the idempotency store is
gone from all of them; costs and tokens stay; another end user and another team are untouched;
a second run finds nothing; only the team's owners may do it."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied
from django.core.management import call_command
from django.db import connection
from django.db.models import Sum
from django.forms.models import model_to_dict
from django.test import Client
from django.urls import reverse

from playground.accounts.models import AuditAction, AuditEvent, StoreMode, Team
from playground.batches.models import Batch, BatchItem
from playground.catalog.seed import ENGINE_MODEL_ID
from playground.chat.models import Conversation, Message, MessageRole
from playground.gateway.models import IdempotencyState, IdempotentRequest
from playground.providers.secrets import data_encrypt
from playground.providers.usage_normalize import NormalizedUsage
from playground.teams.services.erasure import end_user_erase_by_owner, end_user_erasure_count
from playground.usage.api_keys import api_key_issue
from playground.usage.calls.context import Attribution, RequestContext
from playground.usage.erasure import end_user_digest, end_user_erase
from playground.usage.metering import Outcome
from playground.usage.models import (
    RequestPath,
    UsageEndUserDaily,
    UsageEndUserHourly,
    UsageRecord,
    UsageSessionHourly,
    UsageSessionTotal,
    UsageSource,
    UsageStatus,
)
from playground.usage.records import usage_record_create
from playground.usage.rollups import rollups_rebuild
from tests.support.actors import Actors

ANA = "cust-4711-ana"  # the end user erased
BO = "cust-9000-bo"  # another end user of the same team


@dataclass
class Planted:
    gateway: UsageRecord  # x-playground-user: ANA
    by_body: UsageRecord  # the OpenAI `user` field says ANA
    other: UsageRecord  # BO's
    chat: UsageRecord  # a chat turn whose prompt names ANA
    batch: UsageRecord  # a batch item's whose prompt names ANA
    bravo: UsageRecord  # Bravo's end user of the same id


def _record(
    team: Team, *, path: str = RequestPath.GATEWAY, prompt: int = 1000, **context: Any
) -> UsageRecord:
    outcome = Outcome(
        status=UsageStatus.OK,
        usage=NormalizedUsage(prompt_tokens=prompt, completion_tokens=50, cached_tokens=0, raw={}),
        usage_source=UsageSource.PROVIDER,
        ttft_ms=100,
        latency_ms=300,
    )
    return usage_record_create(
        context=RequestContext(
            team_id=team.pk, user_id=None, connection_id=None, model_id=ENGINE_MODEL_ID, path=path, **context
        ),
        outcome=outcome,
    )


def _body(text: str, **more: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}], **more}


def _plant(actors: Actors) -> Planted:
    key, _ = api_key_issue(team_id=actors.team.pk, name="shop-bot", connection_id=None, created_by_id=None)
    bravo_key, _ = api_key_issue(
        team_id=actors.other_team.pk, name="bravo", connection_id=None, created_by_id=None
    )
    ana = Attribution(
        api_key_id=key.pk, end_user=ANA, session=f"s-{ANA}", tags=("gold", ANA), metadata={"customer": ANA}
    )
    conversation = Conversation.objects.create(team=actors.team, user=actors.owner, model_id=ENGINE_MODEL_ID)
    batch = Batch.objects.create(
        team=actors.team, model_id=ENGINE_MODEL_ID, input_kind="jsonl", path="concurrent"
    )
    planted = Planted(
        gateway=_record(actors.team, prompt=1200, attribution=ana, request_body=_body("my order is late")),
        by_body=_record(
            actors.team, attribution=Attribution(api_key_id=key.pk), request_body=_body("hello", user=ANA)
        ),
        other=_record(
            actors.team,
            prompt=700,
            attribution=Attribution(api_key_id=key.pk, end_user=BO),
            request_body=_body("bo's question", user=BO),
        ),
        chat=_record(
            actors.team,
            path=RequestPath.CHAT,
            conversation_id=conversation.pk,
            request_body=_body(f"Customer {ANA} asks for a refund"),
        ),
        batch=_record(
            actors.team,
            path=RequestPath.BATCH,
            source="batch-item:1:1",
            request_body=_body(f"Summarise {ANA}'s ticket"),
        ),
        bravo=_record(
            actors.other_team,
            attribution=Attribution(api_key_id=bravo_key.pk, end_user=ANA),
            request_body=_body(f"{ANA} at Bravo"),
        ),
    )
    question = Message.objects.create(
        conversation=conversation, role=MessageRole.USER, content=f"Customer {ANA} asks for a refund"
    )
    Message.objects.create(
        conversation=conversation,
        parent=question,
        role=MessageRole.ASSISTANT,
        content=f"Refund {ANA}? Yes; {BO} too.",
        usage_record=planted.chat,
    )
    bravo_chat = Conversation.objects.create(
        team=actors.other_team, user=actors.outsider, model_id=ENGINE_MODEL_ID
    )
    Message.objects.create(conversation=bravo_chat, role=MessageRole.USER, content=f"Bravo's {ANA}")
    BatchItem.objects.create(
        batch=batch,
        index=0,
        line=1,
        external_reference=ANA,
        request=_body(f"Summarise {ANA}'s ticket"),
        response={"text": f"{ANA} wants a refund"},
        usage_record=planted.batch,
    )
    BatchItem.objects.create(batch=batch, index=1, line=2, request=_body(f"Summarise {BO}'s ticket"))
    now = dt.datetime.now(dt.UTC)
    for record, name in ((planted.gateway, "idem-ana"), (planted.other, "idem-bo")):
        IdempotentRequest.objects.create(
            api_key=key,
            key=name,
            body_sha256="0" * 64,
            state=IdempotencyState.DONE,
            status=200,
            headers={"x-playground-request-id": str(record.request_id)},
            body=b'{"choices": [{"message": {"content": "Your order ships today"}}]}',
            created_at=now,
        )
    return planted


def _team_text(team: Team) -> str:
    """Everything the team keeps that could hold an end user's id, as one text."""
    rows: list[Any] = [
        *UsageRecord.objects.filter(team=team).values(),
        *UsageEndUserHourly.objects.filter(team=team).values(),
        *UsageEndUserDaily.objects.filter(team=team).values(),
        *Message.objects.filter(conversation__team=team).values(),
        *Conversation.objects.filter(team=team).values(),
        *BatchItem.objects.filter(batch__team=team).values(),
        *(model_to_dict(row) for row in IdempotentRequest.objects.filter(api_key__team=team)),
    ]
    return json.dumps(rows, default=lambda value: value.decode() if isinstance(value, bytes) else str(value))


def _sums(team: Team) -> dict[str, Any]:
    return {
        "records": UsageRecord.objects.filter(team=team).aggregate(
            cost=Sum("total_cost"), prompt=Sum("prompt_tokens"), out=Sum("completion_tokens")
        ),
        "hourly": UsageEndUserHourly.objects.filter(team=team).aggregate(
            Sum("total_cost_e10"), Sum("requests")
        ),
        "daily": UsageEndUserDaily.objects.filter(team=team).aggregate(
            Sum("total_cost_e10"), Sum("prompt_tokens")
        ),
    }


@pytest.mark.django_db
def test_an_end_user_is_gone_from_records_rollups_chats_batches_and_replays(actors: Actors) -> None:
    planted = _plant(actors)
    sums_before = _sums(actors.team)
    other_body = UsageRecord.objects.get(pk=planted.other.pk).request_body
    assert ANA in _team_text(actors.team)

    counts = end_user_erase_by_owner(actor=actors.membership(actors.owner), end_user=ANA)

    assert counts == {
        "records": 2,  # the header's and the body's
        "records_mentioning": 2,  # the chat turn's and the batch item's prompts
        "routing_seals": 0,  # none of them was routed (tests/usage/test_routing_seals.py)
        # the header's hour and day (the body's counts under no end user), its session's hour and total
        "rollup_rows": 4,
        "chat_messages": 2,
        "conversations": 0,
        "comparison_texts": 0,
        "batch_items": 1,
        "batches": 0,
        "idempotent_answers": 1,
        "dataset_items": 0,
        "check_reasons": 0,
    }
    assert ANA not in _team_text(actors.team)
    tombstone = f"erased:{end_user_digest(team_id=actors.team.pk, end_user=ANA)}"
    gateway = UsageRecord.objects.get(pk=planted.gateway.pk)
    assert (gateway.end_user, gateway.request_body, gateway.store_mode) == (
        tombstone,
        None,
        StoreMode.METADATA,
    )
    assert gateway.session == f"s-{tombstone}" and gateway.metadata == {"customer": tombstone}
    # its session's rollups follow the renamed session (the dashboard's runway and hit ratio)
    assert not UsageSessionHourly.objects.filter(session_key__contains=ANA).exists()
    assert UsageSessionTotal.objects.get(team=actors.team, session_key=f"session:s-{tombstone}").requests == 1
    assert (gateway.prompt_tokens, gateway.total_cost) == (1200, planted.gateway.total_cost)
    assert UsageRecord.objects.get(pk=planted.by_body.pk).request_body is None
    chat = UsageRecord.objects.get(pk=planted.chat.pk)
    assert chat.request_body == _body(f"Customer {tombstone} asks for a refund")
    # BO, Bravo and costs are untouched; the tombstone's buckets hold ANA's sums.
    assert UsageRecord.objects.get(pk=planted.other.pk).request_body == other_body
    assert Message.objects.filter(content=f"Refund {tombstone}? Yes; {BO} too.").exists()
    assert list(IdempotentRequest.objects.values_list("key", flat=True)) == ["idem-bo"]
    assert ANA in _team_text(actors.other_team)
    assert UsageRecord.objects.get(pk=planted.bravo.pk).end_user == ANA
    assert _sums(actors.team) == sums_before
    row = UsageEndUserDaily.objects.get(team=actors.team, end_user=tombstone)
    assert (row.requests, row.prompt_tokens) == (1, 1200)
    assert not UsageEndUserDaily.objects.filter(team=actors.team, end_user=ANA).exists()


@pytest.mark.django_db
def test_a_kept_answer_that_names_the_end_user_is_found_through_its_encryption(actors: Actors) -> None:
    key, _ = api_key_issue(team_id=actors.team.pk, name="bot", connection_id=None, created_by_id=None)
    for name, text in (("names-ana", f"Dear {ANA}, your refund is on its way"), ("names-bo", f"Dear {BO}")):
        IdempotentRequest.objects.create(
            api_key=key,
            key=name,
            body_sha256="0" * 64,
            state=IdempotencyState.DONE,
            status=200,
            headers={"x-playground-request-id": "not-an-erased-record"},
            body=data_encrypt(text.encode()),
            created_at=dt.datetime.now(dt.UTC),
        )

    assert end_user_erase(team_id=actors.team.pk, end_user=ANA)["idempotent_answers"] == 1

    assert list(IdempotentRequest.objects.values_list("key", flat=True)) == ["names-bo"]


@pytest.mark.django_db
def test_the_rollups_a_rebuild_makes_agree_with_the_erased_ones(actors: Actors) -> None:
    _plant(actors)
    end_user_erase(team_id=actors.team.pk, end_user=ANA)
    erased = sorted(
        UsageEndUserDaily.objects.filter(team=actors.team).values_list(
            "end_user", "requests", "total_cost_e10"
        )
    )

    rollups_rebuild(team_id=actors.team.pk)

    assert (
        sorted(
            UsageEndUserDaily.objects.filter(team=actors.team).values_list(
                "end_user", "requests", "total_cost_e10"
            )
        )
        == erased
    )


@pytest.mark.django_db
def test_an_end_user_seen_again_after_erasure_is_erased_into_the_same_buckets(actors: Actors) -> None:
    planted = _plant(actors)
    end_user_erase(team_id=actors.team.pk, end_user=ANA)
    _record(
        actors.team, prompt=300, attribution=Attribution(api_key_id=planted.gateway.api_key_id, end_user=ANA)
    )

    assert end_user_erase(team_id=actors.team.pk, end_user=ANA)["rollup_rows"] == 2

    tombstone = f"erased:{end_user_digest(team_id=actors.team.pk, end_user=ANA)}"
    row = UsageEndUserDaily.objects.get(team=actors.team, end_user=tombstone)
    assert (row.requests, row.prompt_tokens) == (2, 1500)


@pytest.mark.django_db
def test_a_second_run_finds_nothing_and_the_audit_log_has_counts_not_the_id(actors: Actors) -> None:
    _plant(actors)
    owner = actors.membership(actors.owner)
    first = end_user_erasure_count(actor=owner, end_user=ANA)
    assert sum(first.values()) == 12 and ANA in _team_text(actors.team)  # counting changes nothing

    assert end_user_erase_by_owner(actor=owner, end_user=ANA) == first
    second = end_user_erase_by_owner(actor=owner, end_user=ANA)

    assert set(second.values()) == {0}
    events = list(
        AuditEvent.objects.filter(team=actors.team, action=AuditAction.END_USER_ERASED).order_by("id")
    )
    assert [event.detail["records"] for event in events] == [2, 0]
    digest = end_user_digest(team_id=actors.team.pk, end_user=ANA)
    assert events[0].detail["end_user_digest"] == digest and events[0].actor == actors.owner
    assert all(ANA not in json.dumps(event.detail) + event.target for event in events)


@pytest.mark.django_db
def test_a_short_id_is_replaced_only_where_a_whole_value_is_it(actors: Actors) -> None:
    record = _record(actors.team, attribution=Attribution(end_user="42", tags=("42", "v420")))
    mentions = _record(actors.team, path=RequestPath.CHAT, request_body=_body("order 42 of 420"))

    counts = end_user_erase(team_id=actors.team.pk, end_user="42")

    assert (counts["records"], counts["records_mentioning"]) == (1, 0)
    erased = UsageRecord.objects.get(pk=record.pk)
    assert erased.end_user.startswith("erased:") and erased.tags == f",{erased.end_user},v420,"
    assert UsageRecord.objects.get(pk=mentions.pk).request_body == _body("order 42 of 420")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("who", "status"), [("admin", 403), ("teammate", 403), ("viewer", 403), ("outsider", 404)]
)
def test_only_the_teams_owners_erase(actors: Actors, who: str, status: int) -> None:
    planted = _plant(actors)
    client = Client()
    client.force_login(getattr(actors, who))
    url = reverse("teams:data-erase", args=[actors.team.pk])

    assert client.post(url, {"end_user": ANA}).status_code == status
    assert client.post(url, {"end_user": ANA, "step": "erase"}).status_code == status
    if who != "outsider":
        with pytest.raises(PermissionDenied):
            end_user_erase_by_owner(actor=actors.membership(getattr(actors, who)), end_user=ANA)
    assert UsageRecord.objects.get(pk=planted.gateway.pk).end_user == ANA


@pytest.mark.django_db
def test_the_owner_sees_the_counts_then_confirms(actors: Actors) -> None:
    planted = _plant(actors)
    client = Client()
    client.force_login(actors.owner)
    url = reverse("teams:data-erase", args=[actors.team.pk])

    counted = client.post(url, {"end_user": ANA})
    assert counted.status_code == 200
    page = counted.content.decode()
    assert "Erase from 12 places" in page and "request records of this end user" in page
    assert UsageRecord.objects.get(pk=planted.gateway.pk).end_user == ANA  # nothing erased yet

    done = client.post(url, {"end_user": ANA, "step": "erase"}, follow=True)
    assert "End user erased: 12 places changed" in done.content.decode()
    assert ANA not in _team_text(actors.team)
    assert "Nothing in the team holds this end user" in client.post(url, {"end_user": ANA}).content.decode()


@pytest.mark.django_db
def test_an_empty_id_is_refused_with_a_reason(actors: Actors) -> None:
    client = Client()
    client.force_login(actors.owner)

    response = client.post(reverse("teams:data-erase", args=[actors.team.pk]), {"end_user": "  "})

    assert response.status_code == 400 and "This field is required" in response.content.decode()


@pytest.mark.django_db
def test_the_command_erases_and_says_0_the_second_time(
    actors: Actors, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant(actors)
    call_command("erase_end_user", "--team", "Alpha", "--end-user", ANA, "--dry-run")
    assert "would erase 12" in capsys.readouterr().out and ANA in _team_text(actors.team)

    call_command("erase_end_user", "--team", "Alpha", "--end-user", ANA)
    assert "erased 12 (records 2," in capsys.readouterr().out
    call_command("erase_end_user", "--team", "Alpha", "--end-user", ANA)
    assert "erased 0 (" in capsys.readouterr().out
    event = AuditEvent.objects.filter(action=AuditAction.END_USER_ERASED).first()
    assert event is not None and event.actor_name == "manage.py"


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "sqlite", reason="the files of a SQLite database")
def test_the_erased_id_is_in_no_database_file_afterwards(actors: Actors) -> None:
    _plant(actors)
    Team.objects.filter(pk=actors.other_team.pk).delete()  # Bravo's copy of the id would be found
    main = Path(connection.settings_dict["NAME"])
    files = (main, main.with_name(main.name + "-wal"))
    assert any(ANA.encode() in path.read_bytes() for path in files if path.exists())

    end_user_erase_by_owner(actor=actors.membership(actors.owner), end_user=ANA)

    assert [path.name for path in files if path.exists() and ANA.encode() in path.read_bytes()] == []
    assert Decimal(UsageRecord.objects.aggregate(total=Sum("total_cost"))["total"]) > 0
