"""The context window a model has on a connection: the one it is served with, else the catalogue's.

The window depends on who serves the model: the embedded engine loads SmolLM2 (trained on
8,192 tokens) with a 4,096-token context by default, and an OpenAI-compatible server may
serve a model with less than its published window. So, in order:

1. the window the connection's model list states (`connection_check`): the engine's, asked
   now and kept `ENGINE_WINDOWS_SECONDS` (the pre-flight asks at every pause in typing);
   another connection's, as its last "Test connection" stored it;
2. the catalogue's, for the model serving on that day;
3. none known: nothing is checked against it.

Every reader of a window (the send check and the pre-flight, Settings' `max_tokens` limit, the
runway, the dashboard, the batch checks, the meter's plausibility check) goes through
`context_window_for`, and `ContextWindow.served` says which figure it is.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ValidationError

from playground.catalog.selectors import catalog_model_serving
from playground.providers.connection_check import models_list, models_list_target
from playground.providers.kinds import ConnectionKind
from playground.providers.models import ProviderConnection

ENGINE_WINDOWS_SECONDS = 60
ENGINE_DOWN_SECONDS = 10  # an engine that did not answer is asked again after this


@dataclass(frozen=True)
class ContextWindow:
    tokens: int
    served: bool  # the connection states it; False: the catalogue's figure

    @property
    def source(self) -> str:
        """Whose figure it is, as the pages say it."""
        return "as served" if self.served else "per the catalogue"


def context_window_for(
    *, connection: ProviderConnection | None, model_id: str, day: dt.date
) -> ContextWindow | None:
    """The window `model_id` has on `connection` (None: a deleted connection, the catalogue's
    only); None when neither knows it. Blocking: the engine may be asked."""
    served = served_windows(connection).get(model_id) if connection is not None else None
    if served is not None:
        return ContextWindow(served, served=True)
    model = catalog_model_serving(model_id=model_id, day=day)
    if model is None or model.context_window is None:
        return None
    return ContextWindow(model.context_window, served=False)


def served_windows(connection: ProviderConnection) -> Mapping[str, int]:
    """The windows `connection` states, by model id: the engine's as it answers now (as its
    last test stored them while it does not answer), another's as its last test stored them."""
    if connection.kind == ConnectionKind.ENGINE:
        live = _engine_windows(connection)
        if live is not None:
            return live
    return connection.listed_windows or {}


def _engine_windows(connection: ProviderConnection) -> Mapping[str, int] | None:
    """The engine's model list's windows (every team's engine connection reaches one engine)."""
    key = f"engine-windows:{settings.ENGINE_URL}"
    kept: dict[str, dict[str, int] | None] | None = cache.get(key)
    if kept is None:
        try:
            listing = async_to_sync(models_list)(models_list_target(connection))
        except ValidationError:
            return None
        kept = {"windows": listing.windows if listing.ok else None}
        cache.set(key, kept, ENGINE_WINDOWS_SECONDS if listing.ok else ENGINE_DOWN_SECONDS)
    return kept["windows"]
