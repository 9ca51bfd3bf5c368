"""The role rules every team write checks first: owners and admins manage, owners alone do some things."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from playground.accounts.models import ROLES_THAT_CAN_MANAGE, Membership, Role

MANAGERS_ONLY = "Only the team's owners and admins can do that."
OWNERS_ONLY = "Only an owner can do that."


def require_manager(actor: Membership) -> None:
    if actor.role not in ROLES_THAT_CAN_MANAGE:
        raise PermissionDenied(MANAGERS_ONLY)


def require_owner(actor: Membership) -> None:
    if actor.role != Role.OWNER:
        raise PermissionDenied(OWNERS_ONLY)
