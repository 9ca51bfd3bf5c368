"""List a connection's models: the "Test connection" check of the team pages.

Goes through the one HTTP seam (`providers.http`: the base-URL policy at connect time, no
redirects, explicit timeouts) to the kind's model listing:

- Workers AI: `GET {base}/accounts/{account}/ai/models/search` (a v4 envelope of `{name}`);
- the embedded engine: `GET {engine}/client/v4/accounts/team-<id>/ai/v1/models` (OpenAI shape);
- OpenAI-compatible: `GET {base}/models` (`{"data": [{"id"}]}`).

The result is the model ids (with the context window of each the listing states: the
engine's `context_window`, or `context_length` / `max_model_len` as other OpenAI-compatible
servers put it) and the latency, or the upstream's error with the token (and anything
credential-shaped) redacted. A successful test keeps the ids and windows on the connection, and
a new conversation on a connection that lists its models (the engine, asked each time; any
other once tested) must name one of them: `connection_model_check`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.exceptions import ValidationError

from playground.providers.adapters.frames import error_details
from playground.providers.adapters.workers_ai import DEFAULT_BASE_URL
from playground.providers.http import UpstreamHTTPError, upstream_stream
from playground.providers.kinds import ConnectionKind, WireFormat
from playground.providers.models import ProviderConnection
from playground.providers.secrets import redact
from playground.providers.services import connection_settings_validate, connection_token, engine_account_id

MAX_MODELS_SHOWN = 200
MODELS_NAMED_IN_ERRORS = 5
# Where a model list states a model's context window in tokens: the embedded engine
# (`context_window`), OpenRouter (`context_length`), vLLM (`max_model_len`).
WINDOW_FIELDS = ("context_window", "context_length", "max_model_len")


@dataclass(frozen=True)
class ModelListing:
    ok: bool
    latency_ms: int
    models: list[str] = field(default_factory=list)
    windows: dict[str, int] = field(default_factory=dict)  # context windows the listing stated
    error: str = ""

    @property
    def models_shown(self) -> list[tuple[str, str]]:
        """The first models, each with the context window the listing states ("4,096"; "": none)."""
        shown = self.models[:MAX_MODELS_SHOWN]
        return [(model, f"{self.windows[model]:,}" if model in self.windows else "") for model in shown]


@dataclass(frozen=True)
class ListingTarget:
    url: str
    token: str


def models_list_target(connection: ProviderConnection) -> ListingTarget:
    """Where the listing goes, with the token; blocking (checks the base-URL policy)."""
    connection_settings_validate(connection=connection)
    if connection.kind == ConnectionKind.ENGINE:
        account = engine_account_id(team_id=connection.team_id)
        return ListingTarget(
            f"{settings.ENGINE_URL}/client/v4/accounts/{account}/ai/v1/models", settings.ENGINE_API_TOKEN
        )
    token = connection_token(connection=connection)
    if connection.spec.wire == WireFormat.WORKERS_AI:
        base = (connection.base_url or DEFAULT_BASE_URL).rstrip("/")
        return ListingTarget(
            f"{base}/accounts/{quote(connection.account_id, safe='')}/ai/models/search", token
        )
    return ListingTarget(f"{connection.base_url.rstrip('/')}/models", token)


async def models_list(target: ListingTarget) -> ModelListing:
    """Ask the upstream for its models; never raises for upstream trouble."""
    headers = {"accept": "application/json"}
    if target.token:
        headers["authorization"] = f"Bearer {target.token}"
    started = time.perf_counter()
    try:
        async with upstream_stream("GET", target.url, headers=headers) as response:
            body = await response.read()
    except UpstreamHTTPError as exc:
        _code, message = error_details(_json(exc.body)) if exc.body else ("", "")
        text = f"{exc.message} {message}".strip() if message else exc.message
        return ModelListing(ok=False, latency_ms=_ms(started), error=_redacted(text, target))
    latency = _ms(started)
    rows = model_rows(_json(body))
    if rows is None:
        return ModelListing(ok=False, latency_ms=latency, error="The upstream's answer is not a model list.")
    return ModelListing(
        ok=True,
        latency_ms=latency,
        models=sorted(model_id for model_id, _ in rows),
        windows={model_id: window for model_id, window in rows if window is not None},
    )


def model_rows(body: Any) -> list[tuple[str, int | None]] | None:
    """(id, context window) from an OpenAI list (`data[].id`) or a v4 envelope (`result[].name`
    or `.id`); the window when the row states one (`WINDOW_FIELDS`), else None."""
    if not isinstance(body, Mapping):
        return None
    rows = body.get("data")
    if rows is None:
        rows = body.get("result")
    if not isinstance(rows, list):
        return None
    found = []
    for row in rows:
        if isinstance(row, Mapping):
            value = row.get("id") if isinstance(row.get("id"), str) else row.get("name")
            if isinstance(value, str):
                found.append((value, _window(row)))
    return found


def _window(row: Mapping[str, Any]) -> int | None:
    for name in WINDOW_FIELDS:
        value = row.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def connection_models_served(connection: ProviderConnection) -> list[str] | None:
    """The model ids the connection serves, when it lists them: the engine's, asked now (it may
    serve another GGUF than the catalogue's); another connection's, as its last test listed
    them. None when unknown (never tested, or the engine did not answer). Blocking."""
    if connection.kind != ConnectionKind.ENGINE:
        return connection.listed_models
    try:
        listing = async_to_sync(models_list)(models_list_target(connection))
    except ValidationError:
        return None
    return listing.models if listing.ok else None


def connection_model_check(*, connection: ProviderConnection, model_id: str) -> None:
    """Refuse a model id the connection does not serve, keyed by the form's `model_id` field."""
    connection_models_check(connection=connection, model_ids=[model_id], field="model_id")


def connection_models_check(*, connection: ProviderConnection, model_ids: Sequence[str], field: str) -> None:
    """Refuse model ids the connection does not serve when it lists its models (blocking: the
    engine is asked), naming them all in one error keyed by `field`."""
    if not model_ids:
        return
    served = connection_models_served(connection)
    missing = [model_id for model_id in model_ids if served is not None and model_id not in served]
    if served is None or not missing:
        return
    more = " …" if len(served) > MODELS_NAMED_IN_ERRORS else ""
    named = ", ".join(served[:MODELS_NAMED_IN_ERRORS]) + more
    source = "it serves" if connection.kind == ConnectionKind.ENGINE else "its last test listed"
    raise ValidationError(
        {
            field: f"{connection.name} does not serve {', '.join(missing)}: {source} {named or 'no models'}. "
            "Choose among those (or test the connection again on the Connections page if its "
            "models changed)."
        }
    )


def connection_test_error(exc: ValidationError) -> ModelListing:
    """A connection refused before sending (bad settings, internal host) as a test result."""
    return ModelListing(ok=False, latency_ms=0, error=" ".join(exc.messages))


def _json(raw: str | bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _redacted(text: str, target: ListingTarget) -> str:
    return redact(text, [target.token] if target.token else [])


def _ms(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)
