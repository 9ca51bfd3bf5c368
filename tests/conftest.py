"""Shared actors (every feature gets an owner, a teammate, a viewer and an outsider test), and what
the chat and batch tests both use: the seeded catalogue, connections to the fake upstream."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import SyncToAsync
from django.db import connections
from pytest_django.fixtures import _get_databases_for_setup
from pytest_django.plugin import DjangoDbBlocker, blocking_manager_key

from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import catalog_seed
from playground.providers.models import ConnectionKind, ProviderConnection
from playground.providers.services import connection_save
from playground.routing.cooldown import health_forget
from playground.routing.selectors import policy_cache_forget
from playground.usage.budgets.ledger import ledgers_forget
from playground.usage.records import price_cards_forget
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors, actors_create
from tests.support.connections import WORKERS_TOKEN, workers_connection_for
from tests.support.flush import flush_by_delete
from tests.support.schema import databases_set_up, schema_copies_remove

# Fixtures that live beside the code they drive, registered once for every test package
# (importing a fixture into a conftest or a test module is what pytest advises against).
pytest_plugins = [
    "tests.fakes.fixtures",
    "tests.fakes.dns",
    "tests.fakes.otlp",
    "tests.support.engine",
    "tests.support.live",
]


# The directories whose tests touch neither the database nor Redis: the engine is a process of its
# own without Django (import-linter's engine contract), and the benchmarks' smoke runs drop the
# suite's DATABASE_URL and REDIS_URL. Both profiles ran them alike, so .ci/run's PostgreSQL + Redis
# suite leaves them out (--database-tests-only); a test in them that asks for the database fails
# the collection, so that nothing the services profile should check is left out with them.
PROFILE_FREE = tuple(Path(__file__).parent / name for name in ("engine", "benchmarks"))
DATABASE_FIXTURES = {"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback"}


def pytest_configure(config: pytest.Config) -> None:
    flush_by_delete()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--database-tests-only",
        action="store_true",
        help="leave out tests/engine and tests/benchmarks, which use neither the database nor Redis "
        "(.ci/run's second suite: the first ran them)",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if config.getoption("database_tests_only") and collection_path in PROFILE_FREE:
        return True
    return None  # pytest's own rules decide


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    functions = [item for item in items if isinstance(item, pytest.Function)]
    for item in functions:
        if any(item.path.is_relative_to(folder) for folder in PROFILE_FREE) and (
            item.get_closest_marker("django_db") or DATABASE_FIXTURES & set(item.fixturenames)
        ):
            raise pytest.UsageError(
                f"{item.nodeid} uses the database, but its folder is left out of the PostgreSQL "
                "suite (PROFILE_FREE in tests/conftest.py): move the test"
            )
    _expensive_fixtures_grouped(functions)


def _expensive_fixtures_grouped(items: list[pytest.Function]) -> None:
    """Tests that share an expensive fixture run on one parallel worker (`make test` runs
    pytest-xdist with --dist loadgroup), so that it is made once per run, not once per worker:
    the real engine's tests (which also keeps other workers' requests off a replica a test kills
    or a prefix cache it reads), and the tests of a module sharing a module-scoped fixture (the
    benchmarks' smoke runs, all started at once)."""
    for item in items:
        if "running_engine" in item.fixturenames:
            item.add_marker(pytest.mark.xdist_group("engine"))
        elif any(
            definitions[-1].scope in ("module", "package")
            for definitions in item._fixtureinfo.name2fixturedefs.values()
        ):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__ if item.module else item.nodeid))


@pytest.fixture(scope="session")
def django_db_setup(
    request: pytest.FixtureRequest,
    django_test_environment: None,
    django_db_blocker: DjangoDbBlocker,
    django_db_use_migrations: bool,
    django_db_keepdb: bool,
    django_db_createdb: bool,
    django_db_modify_db_settings: None,
) -> Iterator[None]:
    """pytest-django's own, except that a parallel worker copies the run's migrated schema when
    another worker made it (tests/support/schema.py): the migrations run once per run, not once
    per worker. With --reuse-db, --create-db or --no-migrations, or without workers, pytest-django's
    own setup runs unchanged."""
    from django.test.utils import teardown_databases

    if not django_db_use_migrations:
        from pytest_django.fixtures import _disable_migrations

        _disable_migrations()
    worker = getattr(request.config, "workerinput", {}).get("workerid")
    aliases, serialized_aliases = _get_databases_for_setup(request.session.items)
    verbosity = request.config.option.verbose
    with django_db_blocker.unblock():
        db_cfg = databases_set_up(
            worker=worker if django_db_use_migrations else None,
            aliases=aliases,
            serialized_aliases=serialized_aliases,
            verbosity=verbosity,
            keepdb=django_db_keepdb and not django_db_createdb,
        )
    yield
    if not django_db_keepdb:
        with django_db_blocker.unblock():
            try:
                teardown_databases(db_cfg, verbosity=verbosity)
            except Exception as exc:
                request.node.warn(
                    pytest.PytestWarning(f"Error when trying to teardown test databases: {exc!r}")
                )


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput") and blocking_manager_key in session.config.stash:
        with session.config.stash[blocking_manager_key].unblock():
            schema_copies_remove()


@pytest.fixture
def actors(db: None) -> Actors:
    return actors_create()


@pytest.fixture
def catalogue(db: None) -> None:
    catalog_seed(CatalogModel, PriceCard)


@pytest.fixture
def workers_connection(actors: Actors, fake_upstream: FakeUpstream, catalogue: None) -> ProviderConnection:
    return workers_connection_for(
        actors.team, fake_upstream, name="Workers AI (fake)", token=WORKERS_TOKEN, is_default=True
    )


@pytest.fixture
def openai_connection(actors: Actors, fake_upstream: FakeUpstream, catalogue: None) -> ProviderConnection:
    connection = ProviderConnection(
        team=actors.team,
        name="Gateway",
        kind=ConnectionKind.OPENAI_COMPATIBLE,
        base_url=fake_upstream.url + "/v1",
    )
    return connection_save(connection=connection, token="sk-test-gateway")


@pytest.fixture(autouse=True)
def fresh_cache(settings: Any) -> None:
    """A cache of the test's own (a new key prefix), so per-user counts start at zero.

    The cache is Redis in the services profile: shared with other test runs, never flushed.
    """
    settings.CACHES = {"default": {**settings.CACHES["default"], "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}}


@pytest.fixture(autouse=True)
def fresh_process_caches() -> None:
    """Each test starts with no remembered price card, ledger id or routing policy: rolled-back
    tests reuse ids, so what one test's database held must not price, hold or route another's
    requests."""
    price_cards_forget()
    ledgers_forget()
    policy_cache_forget()
    health_forget()


@pytest.fixture(scope="session", autouse=True)
def close_connections_of_async_tests(django_db_setup: None) -> Iterator[None]:
    """Close the connection that async tests' ORM calls opened in asgiref's worker thread.

    `sync_to_async` outside a request runs in one shared thread; its connection would keep
    the PostgreSQL test database busy and make its teardown fail.
    """
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()
