"""Shared actors: every feature gets an owner, a teammate and an outsider test."""

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
