"""`POST /v1/scores`: an application scores its team's records by the id the gateway answered
with; bad input is a 400 that names the field, another team's record a 404 like an unknown id."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from django.utils import timezone

from playground.providers.models import ProviderConnection
from playground.usage.api_keys import api_key_issue
from playground.usage.models import ApiKey, Score, ScoreOrigin, UsageRecord
from tests.fakes.upstream import FakeUpstream
from tests.gateway.conftest import KIMI, IssuedKey, issue, records_written
from tests.support.actors import Actors
from tests.support.browser import LiveApp
from tests.support.connections import workers_connection_for

CHAT = {"model": KIMI, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 50}


def _answered_id(gateway: LiveApp, secret: str) -> str:
    """A request through the gateway; the id its answer carried (its record written)."""
    before = UsageRecord.objects.count()
    answer = httpx.post(
        gateway.url + "/v1/chat/completions", json=CHAT, headers={"authorization": f"Bearer {secret}"}
    )
    assert answer.status_code == 200
    records_written(before + 1)
    return answer.headers["x-playground-request-id"]


def _score(gateway: LiveApp, secret: str, body: Any = None, *, raw: bytes | None = None) -> httpx.Response:
    headers = {"authorization": f"Bearer {secret}", "content-type": "application/json"}
    if raw is not None:
        return httpx.post(gateway.url + "/v1/scores", content=raw, headers=headers)
    return httpx.post(gateway.url + "/v1/scores", json=body, headers=headers)


def test_a_key_scores_its_teams_record_by_the_id_it_was_answered_with(
    gateway: LiveApp, gateway_key: IssuedKey
) -> None:
    request_id = _answered_id(gateway, gateway_key.secret)
    record = UsageRecord.objects.get(request_id=request_id)

    thumbs = _score(gateway, gateway_key.secret, {"request_id": request_id, "kind": "thumbs", "value": 0})
    rating = _score(
        gateway,
        gateway_key.secret,
        {"request_id": request_id, "kind": "rating", "value": 4, "comment": "close", "name": "helpfulness"},
    )

    assert (thumbs.status_code, rating.status_code) == (201, 201)
    assert thumbs.json()["request_id"] == request_id and thumbs.json()["object"] == "score"
    assert rating.json() | {"id": 0, "created_at": "", "updated_at": ""} == {
        "object": "score",
        "id": 0,
        "request_id": request_id,
        "kind": "rating",
        "value": 4,
        "name": "helpfulness",
        "comment": "close",
        "created_at": "",
        "updated_at": "",
    }
    scores = list(Score.objects.order_by("id"))
    assert [(s.record_id, s.team_id, s.origin, s.api_key_id, s.kind, s.value) for s in scores] == [
        (record.pk, record.team_id, ScoreOrigin.API, gateway_key.key.pk, "thumbs", 0),
        (record.pk, record.team_id, ScoreOrigin.API, gateway_key.key.pk, "rating", 4),
    ]
    assert scores[0].record_created_at == record.created_at

    # The same key and name again replaces its score (200), whatever the kind: no third row.
    again = _score(gateway, gateway_key.secret, {"request_id": request_id, "kind": "thumbs", "value": True})
    assert again.status_code == 200 and again.json()["id"] == scores[0].pk and again.json()["value"] == 1
    assert Score.objects.count() == 2 and Score.objects.get(pk=scores[0].pk).value == 1
    assert "x-ratelimit-limit-requests" not in again.headers  # the key has no limit


def test_bad_input_is_a_400_naming_what_is_wrong_and_stores_nothing(
    gateway: LiveApp, gateway_key: IssuedKey
) -> None:
    request_id = _answered_id(gateway, gateway_key.secret)
    good = {"request_id": request_id, "kind": "rating", "value": 3}
    cases: list[tuple[Any, str, str]] = [
        (b"{not json", "invalid_json", "The body is not JSON"),
        (b"\xff\xfe", "invalid_json", "The body is not JSON"),
        ([good], "invalid_json", "must be a JSON object"),
        ({**good, "score": 1}, "unknown_field", "Unknown field score"),
        ({"kind": "rating", "value": 3}, "invalid_request_id", "request_id must be"),
        ({**good, "request_id": "abc"}, "invalid_request_id", "(a UUID, as a string)"),
        ({**good, "request_id": 12}, "invalid_request_id", "request_id must be"),
        ({**good, "kind": "stars"}, "invalid_kind", "kind must be one of 'thumbs', 'rating'"),
        ({**good, "value": 6}, "invalid_value", "an integer from 1 to 5"),
        ({**good, "value": 0}, "invalid_value", "an integer from 1 to 5"),
        ({**good, "value": 4.5}, "invalid_value", "an integer from 1 to 5"),
        ({**good, "value": True}, "invalid_value", "an integer from 1 to 5"),
        ({**good, "value": "4"}, "invalid_value", "an integer from 1 to 5"),
        ({**good, "kind": "thumbs", "value": 2}, "invalid_value", "1 (up) or 0 (down)"),
        ({**good, "comment": "x" * 2001}, "invalid_comment", "2,001 characters: at most 2,000"),
        ({**good, "comment": 5}, "invalid_comment", "comment must be a string"),
        ({**good, "name": "n" * 65}, "invalid_name", "at most 64"),
        ({**good, "comment": "a\u0000b"}, "invalid_comment", "NUL"),
    ]
    for body, code, words in cases:
        answer = (
            _score(gateway, gateway_key.secret, raw=body)
            if isinstance(body, bytes)
            else _score(gateway, gateway_key.secret, body)
        )
        assert answer.status_code == 400, body
        error = answer.json()["error"]
        assert (error["code"], error["type"]) == (code, "invalid_request_error"), body
        assert words in error["message"], (body, error["message"])
    assert Score.objects.count() == 0


def test_an_unknown_id_and_another_teams_record_are_the_same_404(
    gateway: LiveApp,
    gateway_key: IssuedKey,
    actors: Actors,
    fake_upstream: FakeUpstream,
    workers_connection: ProviderConnection,
) -> None:
    bravo_connection = workers_connection_for(actors.other_team, fake_upstream, name="Bravo WAI", token="t-b")
    _, bravo_secret = api_key_issue(
        team_id=actors.other_team.pk,
        name="bravo-bot",
        connection_id=bravo_connection.pk,
        created_by_id=actors.outsider.pk,
    )
    bravo_id = _answered_id(gateway, bravo_secret)
    unknown_id = str(uuid.uuid4())

    answers = {
        which: _score(gateway, gateway_key.secret, {"request_id": request_id, "kind": "thumbs", "value": 1})
        for which, request_id in (("bravo", bravo_id), ("unknown", unknown_id))
    }

    for which, answer in answers.items():
        assert answer.status_code == 404, which
        assert answer.json()["error"]["code"] == "record_not_found"
        assert answer.json()["error"]["type"] == "not_found_error"
    # Word for word the same but for the id: nothing tells Bravo's record from none.
    messages = {which: a.json()["error"]["message"] for which, a in answers.items()}
    assert messages["bravo"].replace(bravo_id, "ID") == messages["unknown"].replace(unknown_id, "ID")
    assert Score.objects.count() == 0
    # Bravo's own key scores it.
    own = _score(gateway, bravo_secret, {"request_id": bravo_id, "kind": "thumbs", "value": 1})
    assert own.status_code == 201


def test_scores_need_a_usable_key_and_count_against_its_requests_per_minute(
    gateway: LiveApp, actors: Actors, workers_connection: ProviderConnection
) -> None:
    limited = issue(actors, workers_connection, name="limited", requests_per_minute=2)
    request_id = _answered_id(gateway, limited.secret)  # the first of its two requests this minute
    body = {"request_id": request_id, "kind": "rating", "value": 5}

    assert httpx.post(gateway.url + "/v1/scores", json=body).status_code == 401
    assert _score(gateway, "pgk_not-a-key", body).status_code == 401
    first = _score(gateway, limited.secret, body)
    refused = _score(gateway, limited.secret, {**body, "value": 1})

    assert first.status_code == 201 and first.headers["x-ratelimit-remaining-requests"] == "0"
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limit_exceeded"
    assert "retry-after" in refused.headers
    assert Score.objects.get().value == 5  # the refused one changed nothing

    ApiKey.objects.filter(pk=limited.key.pk).update(revoked_at=timezone.now())
    revoked = _score(gateway, limited.secret, body)
    assert revoked.status_code == 401 and "was revoked" in revoked.json()["error"]["message"]


def test_a_key_whose_connection_was_deleted_may_still_score(
    gateway: LiveApp, gateway_key: IssuedKey, workers_connection: ProviderConnection
) -> None:
    request_id = _answered_id(gateway, gateway_key.secret)
    ApiKey.objects.filter(pk=gateway_key.key.pk).update(connection=None)

    answer = _score(gateway, gateway_key.secret, {"request_id": request_id, "kind": "thumbs", "value": 1})

    assert answer.status_code == 201
    assert httpx.get(gateway.url + "/v1/scores", headers=gateway_key.headers).status_code == 405
