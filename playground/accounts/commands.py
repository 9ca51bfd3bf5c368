"""What the management commands share: finding the team a command names."""

from __future__ import annotations

from django.core.management.base import CommandError

from playground.accounts.models import Team


def team_named(value: str) -> Team:
    """The team with this id, else the one team with this name."""
    if value.isdigit() and (team := Team.objects.filter(pk=int(value)).first()):
        return team
    teams = list(Team.objects.filter(name=value).order_by("pk"))
    if not teams:
        raise CommandError(f"No team has the id or name {value!r}.")
    if len(teams) > 1:
        ids = ", ".join(str(team.pk) for team in teams)
        raise CommandError(f"{len(teams)} teams are named {value!r} (ids {ids}): pass --team with the id.")
    return teams[0]
