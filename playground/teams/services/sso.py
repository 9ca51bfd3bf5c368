"""Team memberships that the sign-in provider asks for (the OIDC_TEAM_CLAIM claim, docs/sso.md)."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from playground.accounts.models import AuditAction, Membership, Role, Team
from playground.teams.services.audit import audit

logger = logging.getLogger(__name__)


def sso_claim_entries(value: Any) -> list[tuple[str, str]]:
    """(team slug, role) pairs of a claim holding "slug:role", "slug" (a member) or a list of them."""
    items = value if isinstance(value, list) else [value]
    entries = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            continue
        slug, _, role = item.strip().partition(":")
        entries.append((slug.strip(), role.strip().lower() or Role.MEMBER))
    return entries


def sso_teams_join(*, user: User, claim: Any) -> list[Membership]:
    """Put `user` in each team the claim names, with its role, when not a member yet; a team they
    are in keeps the role set on its Members page. Unknown teams and roles are logged and skipped
    (the provider never creates teams). Each join is in the team's audit log."""
    joined = []
    for slug, role in sso_claim_entries(claim):
        team = Team.objects.filter(slug=slug).first()
        if team is None or role not in Role.values:
            logger.warning("Single sign-on claim names no team or role here: %r:%r (skipped)", slug, role)
            continue
        with transaction.atomic():
            membership, created = Membership.objects.get_or_create(
                team=team, user=user, defaults={"role": role}
            )
            if created:
                audit(
                    actor=user,
                    team=team,
                    action=AuditAction.MEMBER_JOINED,
                    target=user.get_username(),
                    role=role,
                    via="single sign-on",
                )
                joined.append(membership)
    return joined
