"""Reads of the model catalogue and price cards (shared reference data, not team data)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from django.conf import settings
from django.db.models import F, Q, QuerySet

from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import ENGINE_QUALITY_ID


def catalog_models_for_kind(*, kind: str) -> QuerySet[CatalogModel]:
    """Models a connection of `kind` can serve, current ones first."""
    return (
        CatalogModel.objects.filter(served_by__contains=kind)
        .select_related("alias_of")
        .order_by(F("deprecated_on").asc(nulls_first=True), "display_name")
    )


def model_preselected(model_ids: Sequence[str], *, served: bool = False) -> str | None:
    """The model a form or an example starts with among `model_ids`: the engine's quality model
    when the ids are what the engine serves now (`served`: the catalogue lists it everywhere,
    the engine serves it only where it was installed), else the engine's default instruct
    model when it is offered (the engine's pretrained second model sorts first by name), else
    the first; None when there is none."""
    if served and ENGINE_QUALITY_ID in model_ids:
        return ENGINE_QUALITY_ID
    if settings.ENGINE_MODEL_ID in model_ids:
        return str(settings.ENGINE_MODEL_ID)
    return model_ids[0] if model_ids else None


def catalog_model_serving(*, model_id: str, day: dt.date) -> CatalogModel | None:
    """The model that serves a request for `model_id` on `day`.

    A model retired on or before `day` that is aliased to another is served (and billed) as
    that model (Kimi K2.5 became K2.6 on 2026-05-30). None for a model the catalogue lacks.
    """
    model = CatalogModel.objects.select_related("alias_of", "priced_as").filter(model_id=model_id).first()
    if model is not None and model.alias_of is not None and model.is_retired_on(day):
        return model.alias_of
    return model


def price_card_for(*, model_id: str, day: dt.date, team_id: int | None = None) -> PriceCard | None:
    """The card that prices a request for `model_id` on `day` (for `team_id`, when given): the one
    place that picks a card, for records, budgets, estimates and the Catalogue page alike.

    The team's override for the serving model on that day wins. Then a model priced as another
    (the engine's) takes that model's card on that day, following its alias once it retired, so
    it is priced with the card the Catalogue page shows for that model. Then the global card.
    None when the model or a card for the day is unknown: such a request is recorded unpriced
    rather than priced wrongly.
    """
    model = catalog_model_serving(model_id=model_id, day=day)
    if model is None:
        return None
    override = _override(model, day=day, team_id=team_id)
    if override is not None:
        return override
    if model.priced_as is not None:
        model = catalog_model_serving(model_id=model.priced_as.model_id, day=day) or model.priced_as
        override = _override(model, day=day, team_id=team_id)
        if override is not None:
            return override
    return (
        PriceCard.objects.select_related("model")
        .filter(model=model, team__isnull=True, effective_from__lte=day)
        .order_by("-effective_from")
        .first()
    )


def _override(model: CatalogModel, *, day: dt.date, team_id: int | None) -> PriceCard | None:
    if team_id is None:
        return None
    return (
        PriceCard.objects.select_related("model")
        .filter(model=model, team_id=team_id, effective_from__lte=day)
        .filter(Q(effective_until__isnull=True) | Q(effective_until__gte=day))
        .order_by("-effective_from")
        .first()
    )


def price_card_label(*, model_id: str, card: PriceCard, day: dt.date) -> str:
    """What a card is called beside the costs it priced for `model_id` on `day`: its own label,
    said to be another model's when the request was priced through an alias or `priced_as`
    ("Priced as Kimi K2.5 (retired on 2026-05-30; served as Kimi K2.6 since): Workers AI list
    price for Kimi K2.6 ($0.95 in / $0.16 cached / $4.00 out)")."""
    model = CatalogModel.objects.select_related("alias_of", "priced_as").filter(model_id=model_id).first()
    if model is None or card.model_id == model.pk:
        return card.label
    if model.priced_as is not None and card.model_id != model.alias_of_id:
        priced = CatalogModel.objects.select_related("alias_of").get(pk=model.priced_as.pk)
        retired = f" ({priced.retirement_text(day)})" if card.model_id != priced.pk else ""
        return f"Priced as {priced.display_name}{retired}: {card.label}"
    return f"{model.display_name} {model.retirement_text(day)}: {card.label}"


def price_cards_visible(*, team_id: int) -> QuerySet[PriceCard]:
    """The global cards and `team_id`'s own overrides (never another team's)."""
    return (
        PriceCard.objects.select_related("model", "team")
        .filter(Q(team__isnull=True) | Q(team_id=team_id))
        .order_by("model__display_name", "team_id", "-effective_from")
    )
