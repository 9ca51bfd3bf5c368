"""Price cards: a team's overrides of the catalogue's prices, and the global cards staff add."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from playground.accounts.models import AuditAction, Membership, Team
from playground.catalog.models import CatalogModel, PriceCard
from playground.teams.services.audit import audit
from playground.teams.services.role_checks import require_manager
from playground.usage.models import UsageRecord


def price_override_create(
    *,
    actor: Membership,
    model: CatalogModel,
    effective_from: dt.date,
    effective_until: dt.date | None,
    input_per_m: Decimal,
    cached_input_per_m: Decimal | None,
    cache_write_input_per_m: Decimal | None,
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
            cache_write_input_per_m=cache_write_input_per_m,
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
            cache_write_input_per_m=(
                str(cache_write_input_per_m) if cache_write_input_per_m is not None else None
            ),
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
