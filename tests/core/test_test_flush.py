"""The suite's own flush (`tests/support/flush.py`): PostgreSQL's test database is emptied by
DELETE in one transaction, which holds only while every foreign key is checked at commit."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.color import no_style
from django.db import connection

from playground.accounts.models import Membership, Team
from playground.providers.models import ProviderConnection
from tests.support.actors import Actors

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="PostgreSQL's flush (SQLite's deletes rows already)"
)


@pytest.mark.django_db
def test_every_foreign_key_is_checked_at_commit() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conrelid::regclass::text, conname FROM pg_constraint "
            "WHERE contype = 'f' AND connamespace = 'public'::regnamespace "
            "AND NOT (condeferrable AND condeferred)"
        )
        checked_at_once = cursor.fetchall()
        cursor.execute("SELECT count(*) FROM pg_constraint WHERE contype = 'f'")
        (keys,) = cursor.fetchone() or (0,)

    assert keys > 100
    assert checked_at_once == []


def test_the_flush_deletes_and_still_truncates_when_sequences_restart() -> None:
    plain = connection.ops.sql_flush(no_style(), ["accounts_team"])
    restarting = connection.ops.sql_flush(no_style(), ["accounts_team"], reset_sequences=True)

    assert plain == ['DELETE FROM "accounts_team";']
    assert restarting[0].startswith("TRUNCATE")


@pytest.mark.django_db(transaction=True)
def test_the_flush_empties_tables_that_refer_to_each_other(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    assert Membership.objects.exists() and ProviderConnection.objects.exists()

    call_command("flush", verbosity=0, interactive=False, inhibit_post_migrate=True)

    assert not Team.objects.exists()
    assert not Membership.objects.exists()
    assert not ProviderConnection.objects.exists()
