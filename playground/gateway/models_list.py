"""The models an API key may call, for `GET /v1/models`."""

from __future__ import annotations

from playground.catalog.selectors import catalog_models_for_kind
from playground.providers.connection_check import connection_models_served
from playground.usage.models import ApiKey


def models_for_key(key: ApiKey) -> list[str]:
    """Its allow-list; else what its connection serves (the engine asked now, another as its last
    test listed); else the catalogue's models for the connection's kind. Blocking."""
    if key.allowed_models:
        return list(key.allowed_models)
    assert key.connection is not None
    served = connection_models_served(key.connection)
    if served is not None:
        return served
    return list(catalog_models_for_kind(kind=key.connection.kind).values_list("model_id", flat=True))
