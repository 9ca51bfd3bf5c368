"""Members: change a role, remove someone, leave, hand over ownership; the last owner always stays."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from playground.accounts.models import AuditAction, Membership, Role
from playground.teams.services.audit import audit
from playground.teams.services.role_checks import require_manager, require_owner

LAST_OWNER = "A team needs an owner: make someone else owner first."


def _member_for_change(actor: Membership, membership_id: int) -> Membership:
    """The team's membership `membership_id`, locked; admins may not touch owners."""
    require_manager(actor)
    target = (
        Membership.objects.select_for_update()
        .select_related("user")
        .filter(team_id=actor.team_id, pk=membership_id)
        .first()
    )
    if target is None:
        raise ValidationError("That person is not a member of this team.")
    if target.role == Role.OWNER and actor.role != Role.OWNER:
        raise PermissionDenied("Admins cannot change or remove an owner.")
    return target


def _other_owners(team_id: int, membership: Membership) -> int:
    # Locks the owners' rows: two owners demoting each other at once cannot both succeed.
    owners = Membership.objects.select_for_update().filter(team_id=team_id, role=Role.OWNER)
    return len([row for row in owners if row.pk != membership.pk])


def member_role_change(*, actor: Membership, membership_id: int, role: str) -> Membership:
    if role not in Role.values:
        raise ValidationError("Choose owner, admin, member or viewer.")
    with transaction.atomic():
        target = _member_for_change(actor, membership_id)
        if role == Role.OWNER and actor.role != Role.OWNER:
            raise PermissionDenied("Only an owner can make someone an owner.")
        if target.role == Role.OWNER and role != Role.OWNER and not _other_owners(actor.team_id, target):
            raise ValidationError(LAST_OWNER)
        if target.role == role:
            return target
        previous, target.role = target.role, role
        target.save(update_fields=["role"])
        audit(
            actor=actor.user,
            team=actor.team,
            action=AuditAction.ROLE_CHANGED,
            target=target.user.get_username(),
            previous=previous,
            role=role,
        )
    return target


def member_remove(*, actor: Membership, membership_id: int) -> None:
    with transaction.atomic():
        target = _member_for_change(actor, membership_id)
        if target.role == Role.OWNER and not _other_owners(actor.team_id, target):
            raise ValidationError(LAST_OWNER)
        target.delete()
        audit(
            actor=actor.user,
            team=actor.team,
            action=AuditAction.MEMBER_REMOVED,
            target=target.user.get_username(),
        )


def member_leave(*, membership: Membership) -> None:
    with transaction.atomic():
        locked = Membership.objects.select_for_update().get(pk=membership.pk)
        if locked.role == Role.OWNER and not _other_owners(locked.team_id, locked):
            raise ValidationError("You are the last owner: make someone else owner before you leave.")
        locked.delete()
        audit(actor=membership.user, team=membership.team, action=AuditAction.MEMBER_LEFT)


def ownership_transfer(*, actor: Membership, membership_id: int) -> Membership:
    """Make another member owner, and the acting owner an admin."""
    require_owner(actor)
    with transaction.atomic():
        target = _member_for_change(actor, membership_id)
        if target.pk == actor.pk:
            raise ValidationError("You already own this team.")
        target.role = Role.OWNER
        target.save(update_fields=["role"])
        Membership.objects.filter(pk=actor.pk).update(role=Role.ADMIN)
        audit(
            actor=actor.user,
            team=actor.team,
            action=AuditAction.OWNERSHIP_TRANSFERRED,
            target=target.user.get_username(),
        )
    return target
