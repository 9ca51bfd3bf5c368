"""Admission: who is calling, whether they may, and the metered call that will carry the request.

One blocking step (run in a database thread, `lib.db.db_run`) for the requests that arrive together
(`gateway.admission_queue`): the key and its connection, the model it may call, its rate
limits, the idempotency claim, and the `MeteredCall`, whose budget (the team's, the key
creator's and the key's own) is held before sending, exactly as a chat turn's is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from django.utils import timezone

from playground.gateway.attempts import attempt_adapter, attempt_call
from playground.gateway.attribution import RequestAttribution
from playground.gateway.bodies import ClientRequest
from playground.gateway.errors import GatewayError
from playground.gateway.idempotency import Claim, Replay, idempotency_claim
from playground.gateway.ratelimits import RateState, rate_admit_many
from playground.gateway.routed import RoutedRequest
from playground.providers.adapters import ChatRequest, PassthroughAdapter, PassthroughRoute
from playground.routing.affinity import session_affinity_key
from playground.routing.cooldown import TargetHealth, target_health
from playground.routing.plan import RequestFacts, Target
from playground.routing.problems import RouteUnavailable
from playground.routing.resolve import plan_make
from playground.routing.selectors import routing_budget_used, team_routing
from playground.routing.session_infer import session_inferred
from playground.routing.sticky import sticky_target
from playground.usage.api_keys import api_key_for_secret, api_key_touch, api_keys_for_secrets
from playground.usage.calls.budget import calls_hold_together
from playground.usage.calls.call import MeteredCall
from playground.usage.metering import estimate_tokens
from playground.usage.models import ApiKey


@dataclass
class Admitted:
    key: ApiKey
    adapter: PassthroughAdapter
    call: MeteredCall
    rate: RateState
    claim: Claim | None = None
    # A key that follows the team's routing policy: the plan and its attempts (`gateway.routed`),
    # and what a later attempt is built from (the request as admitted, its affinity key added).
    routed: RoutedRequest | None = None
    request: AdmissionRequest | None = None
    chat: ChatRequest | None = None


def api_key_authenticate(
    secret: str | None, *, found: dict[str, ApiKey] | None = None, sends: bool = True
) -> ApiKey:
    """The usable key with this secret, or a `GatewayError` (401, 403) saying why not.
    `found`: the keys already read for a group's secrets (`api_keys_for_secrets`); `sends`: the
    request goes to the key's connection (a score does not, so a key without one may give it)."""
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
    if sends and key.connection is None:
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
    routed: RoutedRequest | None
    chat: ChatRequest


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
    routed = _routed(key, request) if key.follows_policy else None
    chat = client.chat
    if routed is not None and routed.affinity_added:
        chat = replace(chat, affinity_key=session_affinity_key(key.team_id, routed.session))
    adapter, chat = attempt_adapter(
        key,
        routed.target if routed is not None else None,
        route=request.route,
        chat=chat,
        body=client.body,
        client_wants_usage=client.client_wants_usage,
    )
    claim = None
    if request.idempotency_key is not None and not client.stream:
        outcome = idempotency_claim(api_key=key, key=request.idempotency_key, digest=request.digest)
        if isinstance(outcome, Replay):
            return outcome
        claim = outcome
    return _Prepared(request=request, key=key, adapter=adapter, claim=claim, routed=routed, chat=chat)


def _admitted(prepared: _Prepared, rate: RateState) -> Admitted:
    """The request's metered call, its budget not held yet (`calls_hold_together`)."""
    request, key, routed = prepared.request, prepared.key, prepared.routed
    api_key_touch(key)
    call = attempt_call(
        key,
        prepared.adapter,
        prepared.chat,
        target=routed.target if routed is not None else None,
        attribution=request.headers.attribution,
        store_asked=request.headers.store_asked,
        held_at_admission=True,
    )
    if routed is not None:
        call.route = routed.begin(str(call.context.request_id))
    return Admitted(
        key=key,
        adapter=prepared.adapter,
        call=call,
        rate=rate,
        claim=prepared.claim,
        routed=routed,
        request=request,
        chat=prepared.chat,
    )


def _routed(key: ApiKey, request: AdmissionRequest) -> RoutedRequest | None:
    """The plan of the team's routing policy for the request (None: the team has none), or a
    `GatewayError` (503) when its rule names a connection that no longer exists."""
    routing = team_routing(key.team_id)
    if routing is None:
        return None
    assert key.connection is not None
    client, attribution = request.client, request.headers.attribution
    policy = routing.policy
    session, inferred = attribution.session, False
    if not session and not request.headers.affinity_key and (policy.auto_affinity or policy.sticky_sessions):
        session = session_inferred(key_id=key.pk, end_user=attribution.end_user, body=client.body)
        inferred = bool(session)
    health: dict[Target, TargetHealth] = {}  # each target the plan looks at, read once

    def cooling(target: Target) -> bool:
        if target not in health:
            health[target] = target_health(target)
        return health[target].cooling

    sticky = sticky_target(key.team_id, session) if policy.sticky_sessions and session else None
    try:
        plan = plan_make(
            routing,
            default=Target(key.connection.pk, key.connection.name, client.model),
            facts=RequestFacts(
                model=client.model,
                tags=attribution.tags,
                metadata=attribution.metadata,
                end_user=attribution.end_user,
                session=session,
                prompt_tokens=estimate_tokens(client.chat.prompt_chars),
                stream=client.stream,
            ),
            budget_used=lambda: routing_budget_used(
                team_id=key.team_id,
                key_id=key.pk,
                key_limit=key.monthly_budget_usd,
                user_id=key.created_by_id,
            ),
            sticky=sticky,
            cooling=cooling,
        )
    except RouteUnavailable as exc:
        raise GatewayError(503, "route_unavailable", str(exc)) from None
    affinity_added = plan.auto_affinity and bool(session) and not request.headers.affinity_key
    failing = {target for target, state in health.items() if state.failing}
    return RoutedRequest(
        plan,
        session=session,
        session_inferred=inferred,
        affinity_added=affinity_added,
        failing=failing,
        sticky_was=sticky,
    )
