"""Invitations: a link made (its token kept as a hash only), revoked, checked, accepted or signed up from."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from playground.accounts.models import AuditAction, Invitation, Membership, Role
from playground.teams.services.audit import audit
from playground.teams.services.role_checks import require_manager

INVITATION_LIFETIME = dt.timedelta(days=7)


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def invitation_create(
    *, actor: Membership, role: str, note: str = "", email: str = ""
) -> tuple[Invitation, str]:
    """A one-time invitation and its secret token (shown once: only its hash is stored).

    `email`, if given, only pre-fills the sign-up form of an invitee without an account.
    """
    require_manager(actor)
    if role not in Role.values:
        raise ValidationError("Choose a role for the invitation.")
    if role == Role.OWNER and actor.role != Role.OWNER:
        raise PermissionDenied("Only an owner can invite an owner.")
    token = secrets.token_urlsafe(32)
    with transaction.atomic():
        invitation = Invitation.objects.create(
            team=actor.team,
            role=role,
            note=note[:200],
            email=email,
            token_hash=_token_hash(token),
            created_by=actor.user,
            expires_at=timezone.now() + INVITATION_LIFETIME,
        )
        audit(
            actor=actor.user,
            team=actor.team,
            action=AuditAction.MEMBER_INVITED,
            target=note or email,
            role=role,
            **({"email": email} if email else {}),
        )
    return invitation, token


def invitation_revoke(*, actor: Membership, invitation_id: int) -> None:
    require_manager(actor)
    with transaction.atomic():
        revoked = Invitation.objects.filter(
            team_id=actor.team_id, pk=invitation_id, accepted_at__isnull=True, revoked_at__isnull=True
        ).update(revoked_at=timezone.now())
        if not revoked:
            raise ValidationError("That invitation was already used or revoked.")
        audit(
            actor=actor.user,
            team=actor.team,
            action=AuditAction.INVITATION_REVOKED,
            target=f"#{invitation_id}",
        )


def invitation_for_token(*, token: str) -> Invitation | None:
    return (
        Invitation.objects.select_related("team", "created_by").filter(token_hash=_token_hash(token)).first()
    )


def invitation_problem(invitation: Invitation | None, *, now: dt.datetime | None = None) -> str:
    """Why the invitation cannot be used, or "" when it can."""
    now = now or timezone.now()
    if invitation is None:
        return "This invitation link is not valid. Ask the team's admin for a new one."
    if invitation.accepted_at is not None:
        return "This invitation link was already used. Ask the team's admin for a new one."
    if invitation.revoked_at is not None:
        return "This invitation was revoked. Ask the team's admin for a new one."
    if invitation.expires_at <= now:
        return "This invitation link has expired. Ask the team's admin for a new one."
    return ""


def invitation_accept(*, user: User, token: str, new_account: bool = False) -> Membership:
    """Join the invitation's team with its role; the link works once (a conditional UPDATE)."""
    invitation = invitation_for_token(token=token)
    if problem := invitation_problem(invitation):
        raise ValidationError(problem)
    assert invitation is not None
    if Membership.objects.filter(team_id=invitation.team_id, user=user).exists():
        raise ValidationError(f"You are already a member of {invitation.team.name}.")
    with transaction.atomic():
        used = Invitation.objects.filter(
            pk=invitation.pk, accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now()
        ).update(accepted_at=timezone.now(), accepted_by=user)
        if not used:
            raise ValidationError(
                "This invitation link was already used. Ask the team's admin for a new one."
            )
        membership = Membership.objects.create(team_id=invitation.team_id, user=user, role=invitation.role)
        audit(
            actor=user,
            team=invitation.team,
            action=AuditAction.MEMBER_JOINED,
            target=user.get_username(),
            role=invitation.role,
            invited_by=invitation.created_by.get_username() if invitation.created_by else "",
            account="new" if new_account else "existing",
        )
    return membership


def invitation_signup(*, token: str, user: User) -> Membership:
    """Save `user`, a new account (unsaved, its password set), and join with it, in one
    transaction: a link that is no longer valid creates no account."""
    with transaction.atomic():
        try:
            with transaction.atomic():
                user.save()
        except IntegrityError as exc:  # the same name, taken since the form was checked
            raise ValidationError({"username": "A user with that username already exists."}) from exc
        return invitation_accept(user=user, token=token, new_account=True)
