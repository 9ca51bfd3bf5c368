"""The people every authorisation test needs: Alpha's owner, admin, teammate (a member) and
viewer, and an outsider who owns Bravo. Each signs in with the password `password-<username>`."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User

from playground.accounts.models import Membership, Role, Team


@dataclass(frozen=True)
class Actors:
    team: Team
    other_team: Team
    owner: User
    admin: User
    teammate: User
    viewer: User
    outsider: User

    def in_role(self, role: str) -> User:
        """Alpha's person who was given `role` (the teammate is the member)."""
        return {
            Role.OWNER: self.owner,
            Role.ADMIN: self.admin,
            Role.MEMBER: self.teammate,
            Role.VIEWER: self.viewer,
        }[Role(role)]

    def membership(self, user: User) -> Membership:
        """`user`'s membership of Alpha."""
        return Membership.objects.get(team=self.team, user=user)


def actors_create() -> Actors:
    team = Team.objects.create(name="Alpha", slug="alpha")
    other_team = Team.objects.create(name="Bravo", slug="bravo")
    people = {
        name: User.objects.create_user(name, password=f"password-{name}")
        for name in ("owner", "admin", "teammate", "viewer", "outsider")
    }
    for name, role in (
        ("owner", Role.OWNER),
        ("admin", Role.ADMIN),
        ("teammate", Role.MEMBER),
        ("viewer", Role.VIEWER),
    ):
        Membership.objects.create(team=team, user=people[name], role=role)
    Membership.objects.create(team=other_team, user=people["outsider"], role=Role.OWNER)
    return Actors(team=team, other_team=other_team, **people)
