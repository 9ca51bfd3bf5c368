"""Creating a team: the team, its owner and its engine connection, in one transaction.

A feature workflow, so it lives here above the floors it spans (`accounts` for the team,
`providers` for the connection) rather than in `accounts`, which imports no floor above it.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction
from django.utils.text import slugify

from playground.accounts.models import Membership, Role, Team
from playground.providers.services import connection_engine_ensure


def team_create(*, name: str, owner: User) -> Team:
    """A team with `owner` as its owner and a connection to the embedded engine."""
    with transaction.atomic():
        base = slugify(name)[:50] or "team"
        slug, suffix = base, 1
        while Team.objects.filter(slug=slug).exists():
            suffix += 1
            slug = f"{base}-{suffix}"
        team = Team.objects.create(name=name, slug=slug)
        Membership.objects.create(team=team, user=owner, role=Role.OWNER)
        connection_engine_ensure(team=team)
    return team
