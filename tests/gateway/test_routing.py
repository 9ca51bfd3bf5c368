"""A key that follows the team's routing policy, through the live gateway, against loopback
upstreams failing on cue: fallbacks, retries, budgets on the target called, downgrades, sticky
sessions, automatic affinity, cooldowns, and every attempt on the record."""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import httpx
import pytest
from cloudflare import Cloudflare
from django.conf import LazySettings
from openai import OpenAI

from playground.catalog.models import PriceCard
from playground.providers.models import ConnectionKind, ProviderConnection
from playground.providers.services import connection_save
from playground.routing.services import routing_policy_save
from playground.usage.models import UsageRecord, UsageStatus
from tests.fakes.upstream import (
    FakeUpstream,
    RecordedRequest,
    error,
    hang,
    openai_chunk,
    sse,
)
from tests.gateway.conftest import KIMI, IssuedKey, issue, records_written
from tests.support.actors import Actors
from tests.support.browser import LiveApp

CHEAP = "@cf/openai/gpt-oss-20b"
PATH = "/v1/chat/completions"
BODY: dict[str, Any] = {"model": KIMI, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 50}


@pytest.fixture
def backup(actors: Actors, fake_upstream: FakeUpstream, catalogue: None) -> ProviderConnection:
    """An OpenAI-compatible connection on the same fake upstream: its requests arrive at /v1/..."""
    connection = ProviderConnection(
        team=actors.team,
        name="Backup",
        kind=ConnectionKind.OPENAI_COMPATIBLE,
        base_url=fake_upstream.url + "/v1",
    )
    return connection_save(connection=connection, token="sk-backup")


@pytest.fixture
def down(actors: Actors, catalogue: None) -> ProviderConnection:
    """A connection nothing answers on (port 9 refuses)."""
    connection = ProviderConnection(
        team=actors.team, name="Down", kind=ConnectionKind.OPENAI_COMPATIBLE, base_url="http://127.0.0.1:9/v1"
    )
    return connection_save(connection=connection, token="sk-down")


@pytest.fixture
def routed_key(
    transactional_db: None, actors: Actors, workers_connection: ProviderConnection, backup: ProviderConnection
) -> IssuedKey:
    return issue(actors, workers_connection, name="routed-agent", follows_policy=True)


def policy(actors: Actors, **document: Any) -> None:
    routing_policy_save(team=actors.team, document=document, user=actors.owner)


def fallback_rule(*targets: tuple[str, str], name: str = "main", **rule: Any) -> dict[str, Any]:
    return {"name": name, "targets": [{"connection": c, "model": m} for c, m in targets], **rule}


PRIMARY = ("Workers AI (fake)", KIMI)
BACKUP = ("Backup", KIMI)


def post(gateway: LiveApp, key: IssuedKey, body: Any = BODY, **headers: str) -> httpx.Response:
    return httpx.post(gateway.url + PATH, json=body, headers={**key.headers, **headers}, timeout=30)


def decision(record: UsageRecord) -> dict[str, Any]:
    assert record.routing is not None, "the record keeps the routing decision"
    return record.routing


def called(request: RecordedRequest) -> str:
    return "Backup" if request.path.startswith("/v1/") else "Workers AI (fake)"


def test_a_503_falls_back_to_the_next_target_and_every_attempt_is_on_the_record(
    gateway: LiveApp, routed_key: IssuedKey, actors: Actors, fake_upstream: FakeUpstream
) -> None:
    policy(actors, rules=[fallback_rule(PRIMARY, BACKUP)])
    fake_upstream.script(error(503))

    answer = post(gateway, routed_key)

    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "Hello from the fake upstream."
    assert [called(request) for request in fake_upstream.requests] == ["Workers AI (fake)", "Backup"]
    assert fake_upstream.requests[1].json["model"] == KIMI
    assert answer.headers["x-playground-route"] == "main"
    assert answer.headers["x-playground-attempts"] == "2"
    assert answer.headers["x-playground-model-used"] == f"Backup/{KIMI}"
    failed, answered = records_written(2)
    assert answer.headers["x-playground-request-id"] == str(answered.request_id)
    assert (failed.status, failed.http_status) == (UsageStatus.UPSTREAM_ERROR, 503)
    assert answered.status == UsageStatus.OK
    assert (failed.route_rule, failed.route_fell_back, answered.route_fell_back) == ("main", False, True)
    assert decision(failed)["attempts"][0]["moved_on"] == "503" and decision(failed)["final"] is None
    assert decision(answered)["attempt"] == 2 and decision(answered)["final"] == f"Backup/{KIMI}"
    assert [attempt["status"] for attempt in decision(answered)["attempts"]] == [503, 200]
    assert all(isinstance(attempt["ms"], int) for attempt in decision(answered)["attempts"])
    assert decision(answered)["attempts"][0]["request_id"] == str(failed.request_id)
    assert answered.connection_id != failed.connection_id


def test_an_unreachable_target_and_a_timeout_before_the_first_byte_move_on(
    gateway: LiveApp,
    routed_key: IssuedKey,
    actors: Actors,
    fake_upstream: FakeUpstream,
    down: ProviderConnection,
    settings: LazySettings,
) -> None:
    settings.UPSTREAM_FIRST_TOKEN_TIMEOUT = 0.5
    policy(actors, rules=[fallback_rule(("Down", KIMI), PRIMARY, BACKUP)])
    fake_upstream.script(hang(3))

    answer = post(gateway, routed_key)

    assert answer.status_code == 200, answer.text
    assert answer.headers["x-playground-attempts"] == "3"
    records = records_written(3)
    assert [attempt["moved_on"] for attempt in decision(records[-1])["attempts"]] == [
        "connect_error",
        "timeout",
        "",
    ]


def test_a_request_at_fault_is_not_retried_and_every_failed_target_gives_the_last_error(
    gateway: LiveApp, routed_key: IssuedKey, actors: Actors, fake_upstream: FakeUpstream
) -> None:
    policy(actors, rules=[fallback_rule(PRIMARY, BACKUP)])
    fake_upstream.script(error(400))
    refused = post(gateway, routed_key)
    assert refused.status_code == 400
    assert refused.headers["x-playground-attempts"] == "1"
    assert len(fake_upstream.requests) == 1

    fake_upstream.script(error(503), error(502), error(503))
    failed = post(gateway, routed_key)
    assert failed.status_code == 503  # the last upstream error, in the endpoint's shape
    assert failed.json()["error"]["code"]
    assert failed.headers["x-playground-attempts"] == "3"  # retries.attempts, by default 3
    assert len(fake_upstream.requests) == 4
    assert decision(records_written(4)[-1])["final"] == f"Workers AI (fake)/{KIMI}"


def test_a_stream_is_never_retried_once_its_first_bytes_went_out(
    gateway: LiveApp, routed_key: IssuedKey, actors: Actors, fake_upstream: FakeUpstream
) -> None:
    policy(actors, rules=[fallback_rule(PRIMARY, BACKUP)])
    fake_upstream.script(sse([openai_chunk("Hel"), openai_chunk("lo")], done=False, abort=True))

    with httpx.stream(
        "POST", gateway.url + PATH, json={**BODY, "stream": True}, headers=routed_key.headers, timeout=30
    ) as response:
        text = response.read().decode()

    assert response.status_code == 200
    assert "Hel" in text and '"error"' in text  # the cut is said as a last event
    assert len(fake_upstream.requests) == 1
    assert response.headers["x-playground-attempts"] == "1"


def test_retry_after_is_honoured_up_to_its_cap(
    gateway: LiveApp, routed_key: IssuedKey, actors: Actors, fake_upstream: FakeUpstream
) -> None:
    policy(actors, rules=[fallback_rule(PRIMARY)], retries={"attempts": 3, "max_retry_after_s": 1})
    fake_upstream.script(error(429, retry_after=0.4))
    started = time.monotonic()
    answer = post(gateway, routed_key)
    assert answer.status_code == 200
    assert time.monotonic() - started >= 0.4
    assert answer.headers["x-playground-attempts"] == "2"

    fake_upstream.script(error(429, retry_after=30))
    started = time.monotonic()
    waited_too_long = post(gateway, routed_key)
    assert waited_too_long.status_code == 429 and time.monotonic() - started < 5
    assert waited_too_long.headers["retry-after"] == "30"
    assert waited_too_long.headers["x-playground-attempts"] == "1"


def test_the_budget_is_checked_on_the_target_actually_called(
    gateway: LiveApp, actors: Actors, fake_upstream: FakeUpstream, workers_connection: ProviderConnection
) -> None:
    """A key over budget on a free primary with a paid fallback is refused the paid attempt;
    with `when_budget_cannot_cover`, it goes to the free target instead (a downgrade)."""
    PriceCard.objects.filter(model__model_id=CHEAP).update(
        input_per_m=Decimal(0), cached_input_per_m=Decimal(0), output_per_m=Decimal(0)
    )
    key = issue(
        actors, workers_connection, name="tight", follows_policy=True, monthly_budget_usd=Decimal("0.0001")
    )
    free, paid = ("Workers AI (fake)", CHEAP), ("Workers AI (fake)", KIMI)
    policy(actors, rules=[fallback_rule(free, paid)])
    fake_upstream.script(error(503))

    refused = post(gateway, key, {**BODY, "model": CHEAP})

    assert refused.status_code == 402, refused.text
    assert len(fake_upstream.requests) == 1  # the paid attempt was never sent
    first, second = records_written(2)
    assert first.status == UsageStatus.UPSTREAM_ERROR and first.model_id == CHEAP
    assert second.status == UsageStatus.REJECTED and second.model_id == KIMI
    assert decision(second)["attempts"][-1]["status"] == "budget"

    policy(
        actors,
        rules=[
            fallback_rule(
                paid,
                name="smart",
                when_budget_cannot_cover={"connection": "Workers AI (fake)", "model": CHEAP},
            )
        ],
    )
    downgraded = post(gateway, key)
    assert downgraded.status_code == 200, downgraded.text
    assert downgraded.headers["x-playground-model-used"] == f"Workers AI (fake)/{CHEAP}"
    last = records_written(4)[-1]
    assert last.route_downgraded and decision(last)["downgrade"] == {
        "reason": "budget_cannot_cover",
        "requested": f"Workers AI (fake)/{KIMI}",
        "requested_model_id": KIMI,
    }
    assert fake_upstream.requests[-1].json["model"] == CHEAP


def test_a_sticky_session_stays_on_its_target_across_a_weighted_split(
    gateway: LiveApp, routed_key: IssuedKey, actors: Actors, fake_upstream: FakeUpstream
) -> None:
    split = {
        "name": "split",
        "strategy": "weighted",
        "targets": [
            {"connection": "Workers AI (fake)", "model": KIMI},
            {"connection": "Backup", "model": KIMI},
        ],
    }
    policy(actors, rules=[split], sticky_sessions=True)
    for session in ("s-1", "s-2", "s-3"):
        for _ in range(4):
            assert post(gateway, routed_key, **{"x-playground-session": session}).status_code == 200
    by_session: dict[str, set[str]] = {}
    for request in fake_upstream.requests:
        by_session.setdefault(request.headers["x-session-affinity"], set()).add(called(request))
    assert len(by_session) == 3 and all(len(targets) == 1 for targets in by_session.values())


def test_a_session_without_an_affinity_key_gets_one_on_every_attempt(
    gateway: LiveApp, routed_key: IssuedKey, actors: Actors, fake_upstream: FakeUpstream
) -> None:
    policy(actors, rules=[fallback_rule(PRIMARY, BACKUP)])
    fake_upstream.script(error(503))
    post(gateway, routed_key, **{"x-playground-session": "chat-42"})
    post(gateway, routed_key, **{"x-playground-session": "chat-42", "x-session-affinity": "mine"})
    post(gateway, routed_key)

    keys = [request.headers.get("x-session-affinity") for request in fake_upstream.requests]
    assert keys[0] is not None and keys[0].startswith("pg-") and keys[0] == keys[1]
    assert keys[2] == "mine"
    # No session named at all: one inferred from its messages (another one, another key).
    assert keys[3] is not None and keys[3].startswith("pg-") and keys[3] != keys[0]
    records = records_written(4)
    assert records[1].affinity_key == keys[0] and decision(records[1])["affinity_added"] is True
    assert decision(records[1])["session_inferred"] is False
    assert decision(records[2])["affinity_added"] is False
    assert decision(records[3])["affinity_added"] is True and decision(records[3])["session_inferred"] is True


def test_a_client_that_names_no_session_gets_one_affinity_key_per_conversation(
    gateway: LiveApp, routed_key: IssuedKey, actors: Actors, fake_upstream: FakeUpstream
) -> None:
    """Two conversations of one key, interleaved, neither naming a session nor an affinity key:
    each turn extends its own conversation's messages, so each conversation keeps one key, and
    the two differ. With `auto_affinity` off, nothing is added."""
    policy(actors, rules=[fallback_rule(PRIMARY)])

    def turn(history: list[dict[str, str]], question: str) -> list[dict[str, str]]:
        messages = [*history, {"role": "user", "content": question}]
        assert post(gateway, routed_key, {**BODY, "messages": messages}).status_code == 200
        return [*messages, {"role": "assistant", "content": f"About {question}."}]

    system = {"role": "system", "content": "You are terse."}
    paris, rome = [system], [system]
    for step in range(3):
        paris = turn(paris, f"Paris, part {step}")
        rome = turn(rome, f"Rome, part {step}")
    keys = [request.headers.get("x-session-affinity") for request in fake_upstream.requests]
    assert all(key is not None and key.startswith("pg-") for key in keys)
    assert len(set(keys[0::2])) == 1 and len(set(keys[1::2])) == 1 and keys[0] != keys[1]
    assert all(decision(record)["session_inferred"] for record in records_written(6))

    policy(actors, rules=[fallback_rule(PRIMARY)], auto_affinity=False)
    turn(paris, "Paris, part 3")
    assert "x-session-affinity" not in fake_upstream.requests[-1].headers


def test_a_target_that_keeps_failing_cools_down(
    gateway: LiveApp, routed_key: IssuedKey, actors: Actors, fake_upstream: FakeUpstream
) -> None:
    policy(actors, rules=[fallback_rule(PRIMARY, BACKUP)], cooldown={"failures": 2, "seconds": 60})
    fake_upstream.script(error(503))  # (one fake upstream behind both: each reply is the next request's)
    post(gateway, routed_key)
    fake_upstream.script(error(503))
    post(gateway, routed_key)  # the primary's second failure in a row: it cools
    post(gateway, routed_key)
    assert [called(request) for request in fake_upstream.requests] == [
        "Workers AI (fake)",
        "Backup",
        "Workers AI (fake)",
        "Backup",
        "Backup",
    ]


def test_a_rule_naming_a_deleted_connection_answers_503_naming_the_rule(
    gateway: LiveApp, routed_key: IssuedKey, actors: Actors, backup: ProviderConnection
) -> None:
    policy(actors, rules=[fallback_rule(BACKUP, name="to-backup")])
    backup.delete()
    answer = post(gateway, routed_key)
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "route_unavailable"
    assert "'to-backup'" in answer.json()["error"]["message"]


def test_the_sdks_through_a_routed_policy(
    gateway: LiveApp, routed_key: IssuedKey, actors: Actors, fake_upstream: FakeUpstream
) -> None:
    policy(actors, rules=[fallback_rule(PRIMARY, BACKUP)])
    fake_upstream.script(error(503))
    with OpenAI(base_url=gateway.url + "/v1", api_key=routed_key.secret, max_retries=0) as client:
        whole = client.chat.completions.with_raw_response.create(
            model=KIMI, messages=[{"role": "user", "content": "hi"}], max_tokens=20
        )
        assert whole.headers["x-playground-model-used"] == f"Backup/{KIMI}"
        assert whole.parse().choices[0].message.content == "Hello from the fake upstream."
        fake_upstream.script(error(503))
        chunks = client.chat.completions.create(
            model=KIMI, messages=[{"role": "user", "content": "hi"}], stream=True, max_tokens=20
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
        assert text == "Hello from the fake upstream."
    with Cloudflare(base_url=gateway.url + "/client/v4", api_token=routed_key.secret, max_retries=0) as cf:
        result = cf.ai.run(KIMI, account_id="acct", messages=[{"role": "user", "content": "hi"}])
        assert result is not None
    assert [called(request) for request in fake_upstream.requests][:4] == [
        "Workers AI (fake)",
        "Backup",
        "Workers AI (fake)",
        "Backup",
    ]
    assert len(records_written(5)) == 5
