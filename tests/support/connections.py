"""Provider connections whose requests go to the loopback fake upstream (`tests/fakes/`)."""

from __future__ import annotations

from playground.accounts.models import Team
from playground.providers.models import ConnectionKind, ProviderConnection
from playground.providers.services import connection_save
from tests.fakes.upstream import FakeUpstream

WORKERS_TOKEN = "cf-test-token-abcdef"
ACCOUNT_ID = "0123456789abcdef0123456789abcdef"


def workers_connection_for(
    team: Team, upstream: FakeUpstream, *, name: str, token: str, is_default: bool = False
) -> ProviderConnection:
    """A Workers AI connection of `team` whose requests go to the fake `upstream`."""
    connection = ProviderConnection(
        team=team,
        name=name,
        kind=ConnectionKind.WORKERS_AI,
        base_url=upstream.workers_base_url,
        account_id=ACCOUNT_ID,
        is_default=is_default,
    )
    return connection_save(connection=connection, token=token)
