"""Gateway requests' storage modes: a key's own or its team's, and x-playground-store asking for less."""

from __future__ import annotations

import re

import httpx

from playground.accounts.models import StoreMode
from playground.providers.models import ProviderConnection
from playground.usage.models import TEAM_STORE_MODE, UsageRecord
from tests.fakes.upstream import FakeUpstream
from tests.gateway.conftest import KIMI, IssuedKey, issue, records_written
from tests.support.actors import Actors
from tests.support.browser import LiveApp

EMAIL = "ana.lima@example.com"
BODY = {"model": KIMI, "messages": [{"role": "user", "content": f"Write to {EMAIL}"}], "max_tokens": 50}


def _send(gateway: LiveApp, key: IssuedKey, **headers: str) -> httpx.Response:
    return httpx.post(gateway.url + "/v1/chat/completions", json=BODY, headers={**key.headers, **headers})


def test_a_new_key_keeps_redacted_text_and_the_upstream_gets_it_as_sent(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    assert _send(gateway, gateway_key).status_code == 200

    (record,) = records_written(1)
    assert record.store_mode == StoreMode.REDACTED and record.redactions == {"email": 1}
    assert EMAIL not in str(record.request_body)
    assert EMAIL in fake_upstream.requests[0].json["messages"][0]["content"]  # untouched upstream


def test_the_header_asks_for_less_never_more_and_an_unknown_one_is_refused(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    assert _send(gateway, gateway_key, **{"x-playground-store": "metadata"}).status_code == 200
    assert _send(gateway, gateway_key, **{"x-playground-store": "full"}).status_code == 200
    refused = _send(gateway, gateway_key, **{"x-playground-store": "everything"})

    less, more = records_written(2)
    assert (less.store_mode, less.request_body) == (StoreMode.METADATA, None)
    assert more.store_mode == StoreMode.REDACTED and EMAIL not in str(more.request_body)
    assert refused.status_code == 400 and "x-playground-store" in refused.json()["error"]["message"]
    assert len(fake_upstream.requests) == 2  # the refused one sent nothing


def test_a_key_that_names_no_mode_follows_its_team(
    gateway: LiveApp, actors: Actors, workers_connection: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    key = issue(actors, workers_connection, name="old-key", store_mode=TEAM_STORE_MODE)
    actors.team.store_mode = StoreMode.METADATA
    actors.team.save()

    assert _send(gateway, key).status_code == 200
    actors.team.store_mode = StoreMode.FULL
    actors.team.save()
    assert _send(gateway, key).status_code == 200

    first, second = records_written(2)
    assert (first.store_mode, first.request_body) == (StoreMode.METADATA, None)
    assert second.store_mode == StoreMode.FULL and EMAIL in str(second.request_body)
    assert UsageRecord.objects.filter(api_key=key.key).count() == 2


def test_with_upstream_redaction_on_the_model_receives_the_records_placeholder_and_off_the_address(
    gateway: LiveApp, actors: Actors, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    actors.team.upstream_redaction = True
    actors.team.save()
    assert _send(gateway, gateway_key).status_code == 200
    actors.team.upstream_redaction = False
    actors.team.save()
    assert _send(gateway, gateway_key).status_code == 200

    redacted, as_written = (request.json["messages"][0]["content"] for request in fake_upstream.requests)
    first, second = records_written(2)
    assert first.request_body is not None
    placeholder = first.request_body["messages"][0]["content"].removeprefix("Write to ")
    assert re.fullmatch(r"<email:[0-9a-f]{4}>", placeholder)
    assert redacted == f"Write to {placeholder}"  # the record's own placeholder, not the address
    assert first.redactions == {"email": 1} and first.store_mode == StoreMode.REDACTED
    assert as_written == f"Write to {EMAIL}" and EMAIL not in str(second.request_body)
