"""Team page fixtures: one person per role in Alpha, plus an outsider who owns Bravo."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.contrib.auth.models import User
from django.test import Client

from playground.accounts.models import Membership, Role, Team
from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import catalog_seed
from tests.fakes.fixtures import fake_upstream  # noqa: F401


@dataclass
class Crew:
    team: Team
    other_team: Team
    owner: User
    admin: User
    member: User
    viewer: User
    outsider: User

    def membership(self, user: User) -> Membership:
        return Membership.objects.get(team=self.team, user=user)


@pytest.fixture
def crew(db: None) -> Crew:
    catalog_seed(CatalogModel, PriceCard)  # transactional tests flush it
    team = Team.objects.create(name="Alpha", slug="alpha")
    other_team = Team.objects.create(name="Bravo", slug="bravo")
    people = {role: User.objects.create_user(role, password=f"password-{role}") for role in Role.values}
    for role, user in people.items():
        Membership.objects.create(team=team, user=user, role=role)
    outsider = User.objects.create_user("outsider", password="password-outsider")
    Membership.objects.create(team=other_team, user=outsider, role=Role.OWNER)
    return Crew(team=team, other_team=other_team, outsider=outsider, **people)


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client
