"""The API keys of some secrets' digests, with their teams and connections: a gateway request's first read."""

from __future__ import annotations

import functools
from collections.abc import Collection

from django.db import connection

from playground.accounts.models import Team
from playground.providers.models import ProviderConnection
from playground.usage.models import ApiKey
from playground.usage.statements import raw_sql


def api_keys_with_digests(digests: Collection[str]) -> list[ApiKey]:
    """The keys whose `secret_sha256` is one of `digests`, each with `team` and `connection`
    loaded, as `ApiKey.objects.select_related("team", "connection")` would load them."""
    if not digests:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            _keys_select(connection.vendor) + f" IN ({', '.join(['%s'] * len(digests))})", list(digests)
        )
        rows = cursor.fetchall()
    keys, teams = raw_sql.column_count(ApiKey), raw_sql.column_count(Team)
    found = []
    for row in rows:
        key = raw_sql.from_row(ApiKey, row[:keys])
        key.team = raw_sql.from_row(Team, row[keys : keys + teams])
        key.connection = (
            raw_sql.from_row(ProviderConnection, row[keys + teams :])
            if key.connection_id is not None
            else None
        )
        found.append(key)
    return found


@functools.cache
def _keys_select(vendor: str) -> str:
    """The statement but for its `IN (...)`, made once per database vendor (a test run may use two)."""
    return (
        f"SELECT {raw_sql.select_list(ApiKey, 'k')}, {raw_sql.select_list(Team, 't')}, "  # noqa: S608
        f"{raw_sql.select_list(ProviderConnection, 'c')} "
        f"FROM {raw_sql.table(ApiKey)} k JOIN {raw_sql.table(Team)} t "
        f"ON t.{raw_sql.column(Team, 'id')} = k.{raw_sql.column(ApiKey, 'team')} "
        f"LEFT JOIN {raw_sql.table(ProviderConnection)} c "
        f"ON c.{raw_sql.column(ProviderConnection, 'id')} = k.{raw_sql.column(ApiKey, 'connection')} "
        f"WHERE k.{raw_sql.column(ApiKey, 'secret_sha256')}"
    )
