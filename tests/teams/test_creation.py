"""Creating a team: its owner, a slug of its own and the embedded engine as its default connection."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from playground.accounts.models import Membership, Role
from playground.providers.models import ConnectionKind, ProviderConnection
from playground.teams.creation import team_create

pytestmark = pytest.mark.django_db


def test_it_makes_the_creator_owner_and_connects_the_embedded_engine_as_default() -> None:
    owner = User.objects.create_user("founder")

    team = team_create(name="Platform Team", owner=owner)

    assert team.slug == "platform-team"
    assert Membership.objects.get(team=team).user == owner
    assert Membership.objects.get(team=team).role == Role.OWNER
    engine = ProviderConnection.objects.get(team=team)
    assert engine.kind == ConnectionKind.ENGINE and engine.is_default


def test_it_gives_teams_of_the_same_name_slugs_of_their_own() -> None:
    owner = User.objects.create_user("founder")

    slugs = [team_create(name=name, owner=owner).slug for name in ["Platform", "Platform", "Platform", "!!"]]

    assert slugs == ["platform", "platform-2", "platform-3", "team"]
