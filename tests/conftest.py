"""Shared actors (every feature gets an owner, a teammate and an outsider test), and what the
chat and batch tests both use: the seeded catalogue, a viewer, connections to the fake upstream."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.sync import SyncToAsync
from django.contrib.auth.models import User
from django.db import connections

from playground.accounts.models import Membership, Role, Team
from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import catalog_seed
from playground.providers.models import ConnectionKind, ProviderConnection
from playground.providers.services import connection_save
from tests.fakes.fixtures import fake_upstream  # noqa: F401
from tests.fakes.upstream import FakeUpstream

WORKERS_TOKEN = "cf-test-token-abcdef"
ACCOUNT_ID = "0123456789abcdef0123456789abcdef"


@dataclass
class Actors:
    team: Team
    owner: User
    teammate: User
    outsider: User
    other_team: Team


@pytest.fixture
def actors(db: None) -> Actors:
    team = Team.objects.create(name="Alpha", slug="alpha")
    other_team = Team.objects.create(name="Bravo", slug="bravo")
    owner = User.objects.create_user("owner", password="password-owner")
    teammate = User.objects.create_user("teammate", password="password-teammate")
    outsider = User.objects.create_user("outsider", password="password-outsider")
    Membership.objects.create(team=team, user=owner, role=Role.OWNER)
    Membership.objects.create(team=team, user=teammate, role=Role.MEMBER)
    Membership.objects.create(team=other_team, user=outsider, role=Role.OWNER)
    return Actors(team=team, owner=owner, teammate=teammate, outsider=outsider, other_team=other_team)


@pytest.fixture
def catalogue(db: None) -> None:
    catalog_seed(CatalogModel, PriceCard)


@pytest.fixture
def viewer(actors: Actors) -> User:
    user = User.objects.create_user("viewer", password="password-viewer")
    Membership.objects.create(team=actors.team, user=user, role=Role.VIEWER)
    return user


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


@pytest.fixture
def workers_connection(actors: Actors, fake_upstream: FakeUpstream, catalogue: None) -> ProviderConnection:  # noqa: F811
    return workers_connection_for(
        actors.team, fake_upstream, name="Workers AI (fake)", token=WORKERS_TOKEN, is_default=True
    )


@pytest.fixture
def openai_connection(actors: Actors, fake_upstream: FakeUpstream, catalogue: None) -> ProviderConnection:  # noqa: F811
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


@pytest.fixture(scope="session", autouse=True)
def close_connections_of_async_tests(django_db_setup: None) -> Iterator[None]:
    """Close the connection that async tests' ORM calls opened in asgiref's worker thread.

    `sync_to_async` outside a request runs in one shared thread; its connection would keep
    the PostgreSQL test database busy and make its teardown fail.
    """
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()
