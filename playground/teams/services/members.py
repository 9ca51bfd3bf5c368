"""Writes of the team pages: members, invitations, connections, price overrides, budgets.

Every function takes the acting membership (already scoped to the team by the view, so
another team's object is never found) and checks the role rule itself, so a service is
safe whoever calls it. Every change is written to the team's audit log in the same
transaction. Owners do everything; admins manage connections, budgets and members but
never an owner (nor make one); the last owner can neither leave nor be demoted.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from decimal import Decimal
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from playground.accounts.models import (
    ROLES_THAT_CAN_MANAGE,
    AuditAction,
    AuditEvent,
    Invitation,
    Membership,
    Role,
    Team,
)
from playground.catalog.models import CatalogModel, PriceCard
from playground.providers.connection_check import (
    ModelListing,
    connection_test_error,
    models_list,
    models_list_target,
)
from playground.providers.kinds import ConnectionKind
from playground.providers.models import ProviderConnection
from playground.providers.services import connection_models_store, connection_save
from playground.usage.models import DEFAULT_ALERT_THRESHOLDS, TeamBudget, UsageRecord

INVITATION_LIFETIME = dt.timedelta(days=7)
MANAGERS_ONLY = "Only the team's owners and admins can do that."
OWNERS_ONLY = "Only an owner can do that."
LAST_OWNER = "A team needs an owner: make someone else owner first."
ENGINE_KEPT = "The embedded engine connection is the team's own and cannot be deleted."


def audit(*, actor: User | None, team: Team, action: str, target: str = "", **detail: Any) -> AuditEvent:
    return AuditEvent.objects.create(
        team=team,
        actor=actor,
        actor_name=actor.get_username() if actor else "",
        action=action,
        target=target[:200],
        detail=detail,
    )


def require_manager(actor: Membership) -> None:
    if actor.role not in ROLES_THAT_CAN_MANAGE:
        raise PermissionDenied(MANAGERS_ONLY)


def require_owner(actor: Membership) -> None:
    if actor.role != Role.OWNER:
        raise PermissionDenied(OWNERS_ONLY)


# --- members ---------------------------------------------------------------------------------------


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


# --- invitations -----------------------------------------------------------------------------------


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


# --- connections -----------------------------------------------------------------------------------


def connection_write(
    *,
    actor: Membership,
    connection: ProviderConnection,
    token: str | None,
    previous_base_url: str | None,
) -> ProviderConnection:
    """Create or change a connection of the actor's team (validation and token rules in providers)."""
    require_manager(actor)
    if connection.team_id != actor.team_id:
        raise PermissionDenied(MANAGERS_ONLY)
    created = connection.pk is None
    with transaction.atomic():
        connection_save(connection=connection, token=token, previous_base_url=previous_base_url)
        audit(
            actor=actor.user,
            team=actor.team,
            action=AuditAction.CONNECTION_CREATED if created else AuditAction.CONNECTION_UPDATED,
            target=connection.name,
            kind=connection.kind,
            base_url=connection.base_url,
            token="replaced" if token else ("cleared" if token == "" else "unchanged"),
        )
    return connection


def connection_delete(*, actor: Membership, connection: ProviderConnection) -> None:
    """Delete a connection of the actor's team; the embedded engine's stays (every team has one)."""
    require_manager(actor)
    if connection.team_id != actor.team_id:
        raise PermissionDenied(MANAGERS_ONLY)
    if connection.kind == ConnectionKind.ENGINE:
        raise ValidationError(ENGINE_KEPT)
    with transaction.atomic():
        connection.delete()
        audit(
            actor=actor.user, team=actor.team, action=AuditAction.CONNECTION_DELETED, target=connection.name
        )


def connection_test(*, actor: Membership, connection: ProviderConnection) -> ModelListing:
    """List the provider's models through the HTTP seam (latency, or the redacted error) and
    keep the ids it lists. Sync, for the sync team views: the one async call runs here."""
    require_manager(actor)
    if connection.team_id != actor.team_id:
        raise PermissionDenied(MANAGERS_ONLY)
    try:
        target = models_list_target(connection)
    except ValidationError as exc:
        return connection_test_error(exc)
    result = async_to_sync(models_list)(target)
    if result.ok:
        connection_models_store(connection=connection, models=result.models)
    return result


# --- price cards -----------------------------------------------------------------------------------


def price_override_create(
    *,
    actor: Membership,
    model: CatalogModel,
    effective_from: dt.date,
    effective_until: dt.date | None,
    input_per_m: Decimal,
    cached_input_per_m: Decimal | None,
    output_per_m: Decimal,
    label: str,
) -> PriceCard:
    require_manager(actor)
    if effective_until is not None and effective_until < effective_from:
        raise ValidationError({"effective_until": "The last day cannot come before the first."})
    if PriceCard.objects.filter(team_id=actor.team_id, model=model, effective_from=effective_from).exists():
        raise ValidationError(
            {"effective_from": "This team already has an override for that model from that day."}
        )
    label = label.strip() or f"Negotiated rate for {actor.team.name}"
    with transaction.atomic():
        card = PriceCard.objects.create(
            team=actor.team,
            model=model,
            effective_from=effective_from,
            effective_until=effective_until,
            input_per_m=input_per_m,
            cached_input_per_m=cached_input_per_m,
            output_per_m=output_per_m,
            label=f"{label} (team override)"[:200],
        )
        audit(
            actor=actor.user,
            team=actor.team,
            action=AuditAction.PRICE_OVERRIDE_CREATED,
            target=model.model_id,
            effective_from=effective_from.isoformat(),
            effective_until=effective_until.isoformat() if effective_until else None,
            input_per_m=str(input_per_m),
            cached_input_per_m=str(cached_input_per_m) if cached_input_per_m is not None else None,
            output_per_m=str(output_per_m),
        )
    return card


def price_override_delete(*, actor: Membership, card_id: int) -> None:
    """Delete an override that priced nothing yet; one that did is ended (its records keep it)."""
    require_manager(actor)
    card = PriceCard.objects.select_related("model").filter(team_id=actor.team_id, pk=card_id).first()
    if card is None:
        raise ValidationError("No such price override in this team.")
    with transaction.atomic():
        if UsageRecord.objects.filter(price_card=card).exists():
            yesterday = timezone.now().date() - dt.timedelta(days=1)
            card.effective_until = max(card.effective_from, yesterday)
            card.save(update_fields=["effective_until"])
            outcome = "ended"
        else:
            card.delete()
            outcome = "deleted"
        audit(
            actor=actor.user,
            team=actor.team,
            action=AuditAction.PRICE_OVERRIDE_DELETED,
            target=card.model.model_id,
            effective_from=card.effective_from.isoformat(),
            outcome=outcome,
        )


def price_card_global_create(*, user: User, team: Team, **fields: Any) -> PriceCard:
    """A global card (every team's list price): superusers only."""
    if not user.is_superuser:
        raise PermissionDenied("Only a superuser can add a global price card.")
    model = fields["model"]
    if PriceCard.objects.filter(
        team__isnull=True, model=model, effective_from=fields["effective_from"]
    ).exists():
        raise ValidationError({"effective_from": "That model already has a global card from that day."})
    with transaction.atomic():
        card = PriceCard.objects.create(team=None, **fields)
        audit(
            actor=user,
            team=team,
            action=AuditAction.PRICE_CARD_CREATED,
            target=model.model_id,
            effective_from=fields["effective_from"].isoformat(),
        )
    return card


# --- budgets ---------------------------------------------------------------------------------------


def team_budget_update(
    *, actor: Membership, monthly_limit_usd: Decimal | None, alert_thresholds: list[int], time_zone: str
) -> TeamBudget:
    require_manager(actor)
    with transaction.atomic():
        budget, _ = TeamBudget.objects.select_for_update().get_or_create(team=actor.team)
        before = (budget.monthly_limit_usd, list(budget.alert_thresholds or []), actor.team.time_zone)
        budget.monthly_limit_usd = monthly_limit_usd
        budget.alert_thresholds = sorted(set(alert_thresholds))
        budget.full_clean(exclude=["team"])
        budget.save()
        Team.objects.filter(pk=actor.team_id).update(time_zone=time_zone)
        actor.team.time_zone = time_zone
        audit(
            actor=actor.user,
            team=actor.team,
            action=AuditAction.BUDGET_CHANGED,
            target=actor.team.name,
            previous={"limit": _money(before[0]), "thresholds": before[1], "time_zone": before[2]},
            limit=_money(monthly_limit_usd),
            thresholds=budget.alert_thresholds,
            time_zone=time_zone,
        )
    return budget


def _budget_locked(team: Team) -> TeamBudget:
    """The team's budget row, locked; one made here alerts at the default thresholds (the
    budget form sets its own)."""
    budget, _ = TeamBudget.objects.select_for_update().get_or_create(
        team=team, defaults={"alert_thresholds": list(DEFAULT_ALERT_THRESHOLDS)}
    )
    return budget


def team_unpriced_update(*, actor: Membership, allow: bool) -> TeamBudget:
    """Owners only: whether requests for models without a price card that day may be sent
    while a budget applies (they count nothing against it). Audited."""
    require_owner(actor)
    with transaction.atomic():
        budget = _budget_locked(actor.team)
        if budget.allow_unpriced != allow:
            budget.allow_unpriced = allow
            budget.save(update_fields=["allow_unpriced", "updated_at"])
            audit(
                actor=actor.user,
                team=actor.team,
                action=AuditAction.UNPRICED_REQUESTS_CHANGED,
                target=actor.team.name,
                previous=not allow,
                allowed=allow,
            )
    return budget


def member_budget_update(
    *, actor: Membership, membership_id: int, monthly_budget_usd: Decimal | None
) -> Membership:
    require_manager(actor)
    with transaction.atomic():
        target = (
            Membership.objects.select_related("user").filter(team_id=actor.team_id, pk=membership_id).first()
        )
        if target is None:
            raise ValidationError("That person is not a member of this team.")
        previous = target.monthly_budget_usd
        target.monthly_budget_usd = monthly_budget_usd
        target.save(update_fields=["monthly_budget_usd"])
        audit(
            actor=actor.user,
            team=actor.team,
            action=AuditAction.MEMBER_BUDGET_CHANGED,
            target=target.user.get_username(),
            previous=_money(previous),
            limit=_money(monthly_budget_usd),
        )
    return target


def _money(value: Decimal | None) -> str | None:
    return None if value is None else f"{value:.2f}"
