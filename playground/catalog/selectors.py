"""Reads of the model catalogue and price cards (shared reference data, not team data)."""

from __future__ import annotations

import datetime as dt

from django.db.models import F, Q, QuerySet

from playground.catalog.models import CatalogModel, PriceCard


def catalog_models_for_kind(*, kind: str) -> QuerySet[CatalogModel]:
    """Models a connection of `kind` can serve, current ones first."""
    return CatalogModel.objects.filter(served_by__contains=kind).order_by(
        F("deprecated_on").asc(nulls_first=True), "display_name"
    )


def catalog_model_serving(*, model_id: str, day: dt.date) -> CatalogModel | None:
    """The model that serves a request for `model_id` on `day`.

    A model retired on or before `day` that is aliased to another is served (and billed) as
    that model (Kimi K2.5 became K2.6 on 2026-05-30). None for a model the catalogue lacks.
    """
    model = CatalogModel.objects.select_related("alias_of").filter(model_id=model_id).first()
    if model is not None and model.alias_of is not None and model.is_retired_on(day):
        return model.alias_of
    return model


def price_card_for(*, model_id: str, day: dt.date, team_id: int | None = None) -> PriceCard | None:
    """The card that priced a request for `model_id` on `day` (for `team_id`, when given).

    The team's override for the serving model on that day wins over the global card. None
    when the model or a card for the day is unknown: such a request is recorded unpriced
    rather than priced wrongly.
    """
    model = catalog_model_serving(model_id=model_id, day=day)
    if model is None:
        return None
    cards = PriceCard.objects.select_related("model").filter(model=model, effective_from__lte=day)
    if team_id is not None:
        override = (
            cards.filter(team_id=team_id)
            .filter(Q(effective_until__isnull=True) | Q(effective_until__gte=day))
            .order_by("-effective_from")
            .first()
        )
        if override is not None:
            return override
    return cards.filter(team__isnull=True).order_by("-effective_from").first()


def price_cards_visible(*, team_id: int) -> QuerySet[PriceCard]:
    """The global cards and `team_id`'s own overrides (never another team's)."""
    return (
        PriceCard.objects.select_related("model", "team")
        .filter(Q(team__isnull=True) | Q(team_id=team_id))
        .order_by("model__display_name", "team_id", "-effective_from")
    )
