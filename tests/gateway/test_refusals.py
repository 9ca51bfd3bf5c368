"""Who may call what: keys, models, budgets, attribution caps; each refusal in the endpoint's shape."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import cloudflare
import httpx
import openai
import pytest
from cloudflare import Cloudflare
from django.utils import timezone

from playground.accounts.models import Team
from playground.providers.models import ProviderConnection
from playground.usage.models import ApiKey, TeamBudget, UsageStatus
from tests.fakes.upstream import FakeUpstream
from tests.gateway.conftest import KIMI, IssuedKey, issue, records_written
from tests.support.actors import Actors
from tests.support.browser import LiveApp
from tests.support.connections import workers_connection_for

BODY = {"model": KIMI, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 100}


def _post(
    gateway: LiveApp, key: str, body: Any = BODY, path: str = "/v1/chat/completions", **headers: str
) -> httpx.Response:
    return httpx.post(gateway.url + path, json=body, headers={"authorization": f"Bearer {key}", **headers})


def test_a_missing_wrong_revoked_or_expired_key_is_refused_in_the_openai_shape(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    missing = httpx.post(gateway.url + "/v1/chat/completions", json=BODY)
    wrong = _post(gateway, "pgk_not-a-key")
    assert (missing.status_code, wrong.status_code) == (401, 401)
    assert wrong.json()["error"]["code"] == "invalid_api_key"
    assert wrong.json()["error"]["type"] == "authentication_error"

    assert _post(gateway, gateway_key.secret).status_code == 200
    records_written(1)  # the answer goes out before its record: let the server's write end first
    ApiKey.objects.filter(pk=gateway_key.key.pk).update(revoked_at=timezone.now())
    revoked = _post(gateway, gateway_key.secret)
    assert revoked.status_code == 401 and "was revoked" in revoked.json()["error"]["message"]

    ApiKey.objects.filter(pk=gateway_key.key.pk).update(
        revoked_at=None, expires_at=timezone.now() - dt.timedelta(1)
    )
    expired = _post(gateway, gateway_key.secret)
    assert expired.status_code == 401 and "expired" in expired.json()["error"]["message"]
    assert len(fake_upstream.requests) == 1  # only the accepted request went upstream


def test_x_api_key_works_and_the_v4_routes_answer_errors_in_the_v4_envelope(
    gateway: LiveApp, gateway_key: IssuedKey
) -> None:
    ok = httpx.post(
        gateway.url + "/v1/chat/completions", json=BODY, headers={"x-api-key": gateway_key.secret}
    )
    assert ok.status_code == 200
    with (
        Cloudflare(base_url=gateway.url + "/client/v4", api_token="pgk_wrong", max_retries=0) as cf,
        pytest.raises(cloudflare.APIStatusError) as raised,
    ):
        cf.ai.run(KIMI, account_id="x", messages=[{"role": "user", "content": "hi"}])
    response = raised.value.response
    assert response.status_code == 401
    body = response.json()
    assert body["success"] is False and body["errors"][0]["code"] == 10000
    assert "Incorrect API key" in body["errors"][0]["message"]


def test_another_teams_key_never_reaches_this_teams_connection_records_or_models(
    gateway: LiveApp, actors: Actors, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    other_team = Team.objects.create(name="Other team")
    theirs = workers_connection_for(other_team, fake_upstream, name="Theirs", token="their-upstream-token")
    their_key = issue(actors, theirs, name="their-agent", allowed_models=["@cf/meta/llama-3.1-8b-instruct"])

    listed = httpx.get(gateway.url + "/v1/models", headers=their_key.headers).json()
    assert [m["id"] for m in listed["data"]] == ["@cf/meta/llama-3.1-8b-instruct"]
    refused = _post(gateway, their_key.secret)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "model_not_allowed"
    ok = _post(gateway, their_key.secret, {**BODY, "model": "@cf/meta/llama-3.1-8b-instruct"})
    assert ok.status_code == 200

    (record,) = records_written(1)
    assert record.team_id == other_team.pk and record.connection_id == theirs.pk
    assert fake_upstream.requests[-1].headers["authorization"] == "Bearer their-upstream-token"
    # this team's key calls through this team's connection and token, and its record is this team's
    assert _post(gateway, gateway_key.secret).status_code == 200
    assert fake_upstream.requests[-1].headers["authorization"] == "Bearer cf-test-token-abcdef"
    assert [r.team_id for r in records_written(2)] == [other_team.pk, actors.team.pk]


def test_the_keys_own_budget_refuses_with_402_and_says_what_remains(
    gateway: LiveApp, actors: Actors, workers_connection: ProviderConnection, fake_upstream: FakeUpstream
) -> None:
    key = issue(actors, workers_connection, name="capped", monthly_budget_usd=Decimal("0.0001"))
    refused = _post(gateway, key.secret, {**BODY, "max_tokens": 4000})

    assert refused.status_code == 402  # the SDKs do not retry it by themselves
    error = refused.json()["error"]
    assert error["code"] == "budget_exceeded"
    assert "the API key 'capped'" in error["message"] and "remains this month" in error["message"]
    assert fake_upstream.requests == []
    (record,) = records_written(1)
    assert (record.status, record.total_cost, record.api_key_id) == (UsageStatus.REJECTED, 0, key.key.pk)
    with (
        openai.OpenAI(base_url=gateway.url + "/v1", api_key=key.secret, max_retries=2) as client,
        pytest.raises(openai.APIStatusError) as raised,
    ):
        client.chat.completions.create(
            model=KIMI, messages=[{"role": "user", "content": "hi"}], max_tokens=4000
        )
    assert raised.value.status_code == 402
    assert len(records_written(2)) == 2  # one more refusal: the SDK did not retry it


def test_an_unpriced_model_under_a_budget_is_refused(
    gateway: LiveApp, actors: Actors, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    TeamBudget.objects.create(team=actors.team, monthly_limit_usd=Decimal("5"))
    refused = _post(gateway, gateway_key.secret, {**BODY, "model": "@cf/acme/no-price-card"})
    assert refused.status_code == 402
    assert refused.json()["error"]["code"] == "unpriced_refused"
    assert fake_upstream.requests == []


@pytest.mark.parametrize(
    ("headers", "named"),
    [
        ({"x-playground-user": "u" * 1025}, "x-playground-user"),
        ({"x-playground-metadata": "[1, 2]"}, "x-playground-metadata"),
        ({"x-playground-metadata": "{not json"}, "x-playground-metadata"),
        ({"traceparent": "00-xyz-abc-01"}, "traceparent"),
        ({"x-playground-tags": ",".join(f"t{i}" for i in range(21))}, "x-playground-tags"),
        ({"x-playground-metadata": '{"k": "' + "m" * 4100 + '"}'}, "x-playground-metadata"),
        (
            {f"x-playground-{n}": "v" * 1000 for n in ("user", "session")}
            | {"x-playground-tags": ",".join(["t" * 40] * 20), "x-session-affinity": "a" * 100}
            | {"x-playground-metadata": '{"k": "' + "m" * 4000 + '"}'},
            "together",
        ),
    ],
)
def test_attribution_over_a_cap_or_malformed_is_a_clear_400(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream, headers: dict[str, str], named: str
) -> None:
    response = _post(gateway, gateway_key.secret, **headers)
    assert response.status_code == 400
    assert named in response.json()["error"]["message"]
    assert fake_upstream.requests == []


def test_attribution_is_recorded_and_affinity_forwarded_untouched(
    gateway: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream
) -> None:
    response = _post(
        gateway,
        gateway_key.secret,
        **{
            "x-session-affinity": "ses-Ab/9",
            "x-playground-session": "checkout-42",
            "x-playground-user": "customer-7",
            "x-playground-tags": "prod, billing ,prod",
            "x-playground-metadata": '{"tenant": "acme", "tier": 2}',
            "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        },
    )
    assert response.status_code == 200
    assert fake_upstream.requests[0].headers["x-session-affinity"] == "ses-Ab/9"
    (record,) = records_written(1)
    assert record.affinity_key == "ses-Ab/9"
    assert (record.session, record.end_user, record.tags) == ("checkout-42", "customer-7", ",prod,billing,")
    assert record.metadata == {"tenant": "acme", "tier": 2}
    assert record.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert response.headers["x-playground-request-id"] == str(record.request_id)


def test_bad_bodies_and_queued_requests_get_clear_errors(gateway: LiveApp, gateway_key: IssuedKey) -> None:
    not_json = httpx.post(
        gateway.url + "/v1/chat/completions", content=b"{oops", headers=gateway_key.headers
    ).json()["error"]
    no_model = _post(gateway, gateway_key.secret, {"messages": [{"role": "user", "content": "x"}]}).json()[
        "error"
    ]
    no_messages = _post(gateway, gateway_key.secret, {"model": KIMI}).json()["error"]
    queued = httpx.post(
        gateway.url + f"/client/v4/accounts/a/ai/run/{KIMI}?queueRequest=true",
        json={"requests": [BODY]},
        headers=gateway_key.headers,
    )
    assert not_json["code"] == "invalid_json" and "not JSON" in not_json["message"]
    assert no_model["code"] == "invalid_request" and "`model`" in no_model["message"]
    assert "`messages`" in no_messages["message"]
    assert queued.status_code == 400 and "Batches" in queued.json()["errors"][0]["message"]
    unknown = httpx.get(gateway.url + "/v1/embeddings", headers=gateway_key.headers)
    assert unknown.status_code == 404 and "error" in unknown.json()
