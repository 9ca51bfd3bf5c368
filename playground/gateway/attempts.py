"""The adapter and metered call of one attempt of a gateway request: on the key's connection,
or on a routing plan's target (another connection, another model id). Blocking: run in the
admission step's database thread, or with `lib.db.db_run`."""

from __future__ import annotations

from dataclasses import replace

from django.core.exceptions import ValidationError

from playground.gateway.errors import GatewayError
from playground.providers.adapters import (
    ChatRequest,
    PassthroughAdapter,
    PassthroughRoute,
    RouteNotServed,
    passthrough_for,
)
from playground.providers.models import ProviderConnection
from playground.routing.plan import Target
from playground.usage.budgets import KeyBudget
from playground.usage.calls.call import MeteredCall
from playground.usage.calls.context import Attribution
from playground.usage.calls.kinds import gateway_call
from playground.usage.models import ApiKey
from playground.usage.storage import key_store_mode, store_mode_applied


def attempt_adapter(
    key: ApiKey,
    target: Target | None,
    *,
    route: PassthroughRoute,
    chat: ChatRequest,
    body: dict[str, object],
    client_wants_usage: bool,
) -> tuple[PassthroughAdapter, ChatRequest]:
    """The pass-through to the key's connection (`target` None), or to a plan's target with its
    model id in the body (and the path, for `/ai/run`), sending once: the routed request's own
    loop retries (`gateway.routed`). Raises `GatewayError` when it cannot be sent at all."""
    connection = key.connection
    if target is not None:
        chat = replace(chat, model=target.model)
        body = {**body, "model": target.model} if "model" in body else body
        if target.connection_id != key.connection_id:
            connection = ProviderConnection.objects.filter(
                pk=target.connection_id, team_id=key.team_id
            ).first()
            if connection is None:
                raise GatewayError(
                    503, "route_unavailable", f"The routing target {target.label} no longer exists."
                )
    assert connection is not None
    try:
        adapter = passthrough_for(
            connection,
            route=route,
            request=chat,
            body=body,
            client_wants_usage=client_wants_usage,
            single_attempt=target is not None,
        )
    except RouteNotServed as exc:
        raise GatewayError(400, "route_not_served", str(exc)) from None
    except ValidationError as exc:
        whose = "The key's connection" if target is None else f"The routing target {target.label}"
        raise GatewayError(
            503, "connection_unusable", f"{whose} cannot be used now: {' '.join(exc.messages)}"
        ) from None
    return adapter, chat


def attempt_call(
    key: ApiKey,
    adapter: PassthroughAdapter,
    chat: ChatRequest,
    *,
    target: Target | None,
    attribution: Attribution,
    store_asked: str,
    held_at_admission: bool,
) -> MeteredCall:
    """The attempt's metered call: its record names the connection and model it called, and
    keeps the text the key's storage mode says, or less if the request asked (`store_asked`)."""
    return gateway_call(
        adapter=adapter,
        request=chat,
        team_id=key.team_id,
        user_id=key.created_by_id,
        connection_id=target.connection_id if target is not None else key.connection_id,
        model_id=chat.model,
        attribution=attribution,
        key=KeyBudget(id=key.pk, name=key.name, limit=key.monthly_budget_usd),
        store=store_mode_applied(key_store_mode(key), store_asked),
        upstream_redaction=key.team.upstream_redaction,  # the team is loaded with the key
        held_at_admission=held_at_admission,
    )
