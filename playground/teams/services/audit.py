"""The team's audit log: every team write records who changed what, in its own transaction, as the
next link of the team's chain of decision records (`playground.accounts.chain`)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from playground.accounts.chain import AUDIT_EVENTS, chain_append
from playground.accounts.models import AuditEvent, Team


def audit(
    *, actor: User | None, team: Team, action: str, target: str = "", actor_name: str = "", **detail: Any
) -> AuditEvent:
    """`actor_name` names an actor who is no account (a management command); a user's is their username."""
    event = AuditEvent(
        team=team,
        actor=actor,
        actor_name=actor.get_username() if actor else actor_name,
        action=action,
        target=target[:200],
        detail=detail,
    )
    return chain_append(event, kind=AUDIT_EVENTS)
