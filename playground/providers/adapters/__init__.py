"""Provider adapters: one per upstream wire format, all yielding `playground.providers.events`."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from django.conf import settings

from playground.providers.adapters.base import ChatAdapter
from playground.providers.adapters.openai_compat import OpenAICompatAdapter
from playground.providers.adapters.passthrough import PassthroughAdapter
from playground.providers.adapters.request import ChatRequest
from playground.providers.adapters.workers_ai import DEFAULT_BASE_URL, WorkersAIAdapter
from playground.providers.kinds import ConnectionKind, WireFormat
from playground.providers.models import ProviderConnection
from playground.providers.queue import QueueClient
from playground.providers.services import (
    connection_settings_validate,
    connection_token,
    engine_account_id,
)

__all__ = [
    "ChatAdapter",
    "ChatRequest",
    "PassthroughAdapter",
    "PassthroughRoute",
    "RouteNotServed",
    "adapter_for",
    "passthrough_for",
    "queue_client_for",
]


def adapter_for(connection: ProviderConnection) -> WorkersAIAdapter | OpenAICompatAdapter:
    """The adapter for a connection's wire format, with its base URL and decrypted token.

    Blocking (it resolves the host to re-check the base-URL policy right before use, as a
    name can be re-pointed after the connection was saved): call it via `sync_to_async`.
    Raises `ValidationError` when the connection is not usable.
    """
    connection_settings_validate(connection=connection)
    if connection.kind == ConnectionKind.ENGINE:  # this machine's engine, each team under its own account
        return WorkersAIAdapter(
            base_url=settings.ENGINE_URL + "/client/v4",
            account_id=engine_account_id(team_id=connection.team_id),
            token=settings.ENGINE_API_TOKEN,
        )
    token = connection_token(connection=connection)
    match connection.spec.wire:
        case WireFormat.WORKERS_AI:
            return WorkersAIAdapter(
                base_url=connection.base_url or DEFAULT_BASE_URL,
                account_id=connection.account_id,
                token=token,
            )
        case WireFormat.OPENAI:
            return OpenAICompatAdapter(base_url=connection.base_url, token=token)


def queue_client_for(connection: ProviderConnection) -> QueueClient | None:
    """The queue (`?queueRequest=true`) of a connection whose kind serves one, else None.

    Blocking like `adapter_for` (the same checks, the same base URL, account id and token).
    """
    if not connection.spec.queue:
        return None
    adapter = adapter_for(connection)
    if not isinstance(adapter, WorkersAIAdapter):
        return None
    return QueueClient(base_url=adapter.base_url, account_id=adapter.account_id, token=adapter.token)


class PassthroughRoute(StrEnum):
    """Which API a pass-through request speaks, as the client called it."""

    RUN = "run"  # Workers AI's native POST .../ai/run/{model}
    CHAT_COMPLETIONS = "chat-completions"  # OpenAI's POST .../chat/completions


class RouteNotServed(ValueError):
    """The connection does not speak the API the client called."""


def passthrough_for(
    connection: ProviderConnection,
    *,
    route: PassthroughRoute,
    request: ChatRequest,
    body: dict[str, Any],
    client_wants_usage: bool,
    single_attempt: bool = False,
) -> PassthroughAdapter:
    """A pass-through of `body` to the connection's endpoint for `route` (blocking, like `adapter_for`).

    A Workers AI connection (or the engine) serves both APIs; an OpenAI-compatible one only
    chat completions: asked for `/ai/run`, it raises `RouteNotServed`.
    """
    adapter = adapter_for(connection)
    if route == PassthroughRoute.CHAT_COMPLETIONS:
        url = adapter.openai_endpoint()
    elif isinstance(adapter, WorkersAIAdapter):
        url = adapter.endpoint(request)
    else:
        raise RouteNotServed(
            f"This key's connection ({connection.spec.label}) speaks OpenAI's API only: "
            "send the request to /v1/chat/completions instead."
        )
    return PassthroughAdapter(
        url=url,
        token=adapter.token,
        body=body,
        client_wants_usage=client_wants_usage,
        single_attempt=single_attempt,
    )
