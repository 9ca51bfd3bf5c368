"""Admission: who is calling, whether they may, and the metered call that will carry the request.

One blocking step (run in a database thread, `lib.db.db_run`) for the requests that arrive together
(`gateway.admission_queue`): the key and its connection, the model it may call, its rate
limits, the idempotency claim, and the `MeteredCall`, whose budget (the team's, the key
creator's and the key's own) is held before sending, exactly as a chat turn's is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.utils import timezone

from playground.gateway.attribution import RequestAttribution
from playground.gateway.bodies import ClientRequest
from playground.gateway.errors import GatewayError
from playground.gateway.idempotency import Claim, Replay, idempotency_claim
from playground.gateway.ratelimits import RateState, rate_admit_many
from playground.providers.adapters import (
    PassthroughAdapter,
    PassthroughRoute,
    RouteNotServed,
    passthrough_for,
)
from playground.usage.api_keys import api_key_for_secret, api_key_touch, api_keys_for_secrets
from playground.usage.budgets import KeyBudget
from playground.usage.calls.budget import calls_hold_together
from playground.usage.calls.call import MeteredCall
from playground.usage.calls.kinds import gateway_call
from playground.usage.models import ApiKey


@dataclass
class Admitted:
    key: ApiKey
    adapter: PassthroughAdapter
    call: MeteredCall
    rate: RateState
    claim: Claim | None = None


def api_key_authenticate(secret: str | None, *, found: dict[str, ApiKey] | None = None) -> ApiKey:
    """The usable key with this secret, or a `GatewayError` (401, 403) saying why not.
    `found`: the keys already read for a group's secrets (`api_keys_for_secrets`)."""
    if not secret:
        raise GatewayError(
            401,
            "invalid_api_key",
            "No API key: send `Authorization: Bearer <key>` (or `x-api-key`). A team admin creates "
            "keys on the team's API keys page.",
        )
    key = found.get(secret) if found is not None else api_key_for_secret(secret)
    if key is None:
        raise GatewayError(401, "invalid_api_key", "Incorrect API key: no key of any team has this secret.")
    if key.revoked_at is not None:
        raise GatewayError(
            401,
            "invalid_api_key",
            f"The API key {key.name!r} was revoked on {key.revoked_at:%Y-%m-%d %H:%M} UTC.",
        )
    if key.expires_at is not None and key.expires_at <= timezone.now():
        raise GatewayError(
            401,
            "invalid_api_key",
            f"The API key {key.name!r} expired on {key.expires_at:%Y-%m-%d %H:%M} UTC.",
        )
    if key.connection is None:
        raise GatewayError(
            403,
            "no_connection",
            f"The API key {key.name!r} has no connection (it was deleted): a team admin can edit the key.",
        )
    return key


@dataclass(frozen=True)
class AdmissionRequest:
    """What admission needs of one request: its secret, route, body and attribution headers."""

    secret: str | None
    route: PassthroughRoute
    client: ClientRequest
    headers: RequestAttribution
    idempotency_key: str | None = None
    digest: str = ""  # the body's, for an idempotent request


def gateway_admit_many(requests: Sequence[AdmissionRequest]) -> list[Admitted | Replay | Exception]:
    """Admit the requests that arrived together (one blocking step, issue 24): each one's
    admission, the stored answer of an idempotent repeat, or its `GatewayError`. Their keys are
    read in one statement, each key's rate windows once (`rate_admit_many`), and their budgets
    held together (`calls_hold_together`): each is admitted or refused exactly as if it had
    come alone, in order."""
    keys = api_keys_for_secrets({request.secret for request in requests if request.secret})
    staged: list[_Prepared | Replay | Exception] = []
    for request in requests:
        try:
            staged.append(_prepared(request, keys))
        except GatewayError as error:
            staged.append(error)
    rates = iter(rate_admit_many([item.key for item in staged if isinstance(item, _Prepared)]))
    results: list[Admitted | Replay | Exception] = []
    for item in staged:
        if isinstance(item, _Prepared):
            rate = next(rates)
            results.append(rate if isinstance(rate, GatewayError) else _admitted(item, rate))
        else:
            results.append(item)
    calls_hold_together([result.call for result in results if isinstance(result, Admitted)])
    return results


@dataclass(frozen=True)
class _Prepared:
    """A request whose key, model, connection and idempotency claim passed; its rates come next."""

    request: AdmissionRequest
    key: ApiKey
    adapter: PassthroughAdapter
    claim: Claim | None


def _prepared(request: AdmissionRequest, keys: dict[str, ApiKey]) -> _Prepared | Replay:
    """Everything before the rate limits, or the stored answer of an idempotent repeat."""
    client = request.client
    key = api_key_authenticate(request.secret, found=keys)
    if key.allowed_models and client.model not in key.allowed_models:
        raise GatewayError(
            403,
            "model_not_allowed",
            f"The API key {key.name!r} may not call {client.model}: "
            f"it may call {', '.join(key.allowed_models)}.",
        )
    assert key.connection is not None
    try:
        adapter = passthrough_for(
            key.connection,
            route=request.route,
            request=client.chat,
            body=client.body,
            client_wants_usage=client.client_wants_usage,
        )
    except RouteNotServed as exc:
        raise GatewayError(400, "route_not_served", str(exc)) from None
    except ValidationError as exc:
        raise GatewayError(
            503, "connection_unusable", f"The key's connection cannot be used now: {' '.join(exc.messages)}"
        ) from None
    claim = None
    if request.idempotency_key is not None and not client.stream:
        outcome = idempotency_claim(api_key=key, key=request.idempotency_key, digest=request.digest)
        if isinstance(outcome, Replay):
            return outcome
        claim = outcome
    return _Prepared(request=request, key=key, adapter=adapter, claim=claim)


def _admitted(prepared: _Prepared, rate: RateState) -> Admitted:
    """The request's metered call, its budget not held yet (`calls_hold_together`)."""
    request, key = prepared.request, prepared.key
    api_key_touch(key)
    call = gateway_call(
        adapter=prepared.adapter,
        request=request.client.chat,
        team_id=key.team_id,
        user_id=key.created_by_id,
        connection_id=key.connection_id,
        model_id=request.client.model,
        attribution=request.headers.attribution,
        key=KeyBudget(id=key.pk, name=key.name, limit=key.monthly_budget_usd),
    )
    return Admitted(key=key, adapter=prepared.adapter, call=call, rate=rate, claim=prepared.claim)
