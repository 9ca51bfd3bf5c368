"""Gone means gone from the files: a deleted value is not left in the SQLite database's freed
pages or its write-ahead log once the space is reclaimed; PostgreSQL's tables are vacuumed."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from django.db import connection, transaction

from playground.usage.models import UsageRecord, UsageStatus
from playground.usage.reclaim import reclaim_freed_space
from tests.support.actors import Actors

sqlite_only = pytest.mark.skipif(connection.vendor != "sqlite", reason="the files of a SQLite database")


def _files_holding(value: str) -> list[str]:
    """Which of the database's files (main, `-wal`) hold `value`'s bytes."""
    main = Path(connection.settings_dict["NAME"])
    needle = value.encode()
    return [
        path.name
        for path in (main, main.with_name(main.name + "-wal"))
        if path.exists() and needle in path.read_bytes()
    ]


def _main_file() -> str:
    return Path(connection.settings_dict["NAME"]).name


def _planted_record(actors: Actors) -> tuple[UsageRecord, str]:
    value = f"planted-{uuid.uuid4().hex}"
    record = UsageRecord.objects.create(
        team=actors.team,
        model_id="m",
        status=UsageStatus.OK,
        request_body={"messages": [{"role": "user", "content": f"my secret is {value}"}]},
        error_text=f"quoted {value}",
    )
    return record, value


def _checkpoint() -> None:
    """What SQLite does by itself now and then: the log's frames copied into the main file."""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")


@sqlite_only
@pytest.mark.django_db(transaction=True)
def test_every_connection_zeroes_what_it_deletes(actors: Actors) -> None:
    """Set by the settings' init_command on every new connection (Debian builds SQLite with it
    on by default, other builds do not)."""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA secure_delete = OFF")
    connection.close()
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA secure_delete")
        assert cursor.fetchone() == (1,)
    assert "PRAGMA secure_delete=ON;" in connection.settings_dict["OPTIONS"]["init_command"]


@sqlite_only
@pytest.mark.django_db(transaction=True)
def test_a_deleted_value_is_in_no_file_once_the_space_is_reclaimed(actors: Actors) -> None:
    record, value = _planted_record(actors)
    _checkpoint()  # an old record: its page is in the main file
    assert _files_holding(value) == [_main_file()]

    record.delete()
    # Deleted, but the main file still holds the old page until the log is checkpointed.
    assert _files_holding(value)

    reclaim_freed_space([UsageRecord])
    assert _files_holding(value) == []


@sqlite_only
@pytest.mark.django_db(transaction=True)
def test_a_value_blanked_in_place_is_in_no_file_once_the_space_is_reclaimed(actors: Actors) -> None:
    record, value = _planted_record(actors)
    UsageRecord.objects.filter(pk=record.pk).update(request_body=None, error_text="")
    assert _files_holding(value)  # the insert's frame is still in the log

    reclaim_freed_space([UsageRecord])
    assert _files_holding(value) == []


@sqlite_only
@pytest.mark.django_db(transaction=True)
def test_without_secure_delete_a_checkpoint_leaves_the_value_in_a_freed_page(actors: Actors) -> None:
    """Why the connections run with secure_delete: the checkpoint alone is not enough."""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA secure_delete = OFF")
    try:
        record, value = _planted_record(actors)
        _checkpoint()
        record.delete()
        _checkpoint()
        assert _files_holding(value) == [_main_file()]
    finally:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA secure_delete = ON")


@sqlite_only
@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_the_space_is_reclaimed_once_it_commits(actors: Actors) -> None:
    record, value = _planted_record(actors)
    with transaction.atomic():
        UsageRecord.objects.filter(pk=record.pk).delete()
        reclaim_freed_space([UsageRecord])
        assert _files_holding(value)  # a checkpoint cannot run inside the deletion's transaction
    assert _files_holding(value) == []


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's VACUUM")
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_the_tables_are_vacuumed_once_the_deletion_commits(actors: Actors) -> None:
    def vacuums() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            table = UsageRecord._meta.db_table
            cursor.execute("SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = %s", [table])
            (count,) = cursor.fetchone()
        return int(count)

    record, _value = _planted_record(actors)
    before = vacuums()
    with transaction.atomic():
        record.delete()
        reclaim_freed_space([UsageRecord])
        assert vacuums() == before  # VACUUM cannot run inside the deletion's transaction
    assert vacuums() == before + 1
