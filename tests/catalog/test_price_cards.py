from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import ENGINE_GEMMA_ID, ENGINE_MODEL_ID, ENGINE_QUALITY_ID, KIMI_K25, KIMI_K26
from playground.catalog.selectors import catalog_models_for_kind, price_card_for, price_card_label

pytestmark = pytest.mark.django_db


def test_kimi_k25_is_seeded_at_its_list_price() -> None:
    card = price_card_for(model_id=KIMI_K25, day=dt.date(2026, 5, 29))

    assert card is not None and card.model.model_id == KIMI_K25
    assert (card.input_per_m, card.cached_input_per_m, card.output_per_m) == (
        Decimal("0.60"),
        Decimal("0.10"),
        Decimal("3.00"),
    )


def test_kimi_k25_is_billed_as_k26_from_its_retirement_day() -> None:
    card = price_card_for(model_id=KIMI_K25, day=dt.date(2026, 5, 30))

    assert card is not None and card.model.model_id == KIMI_K26
    assert (card.input_per_m, card.cached_input_per_m, card.output_per_m) == (
        Decimal("0.95"),
        Decimal("0.16"),
        Decimal("4.00"),
    )


@pytest.mark.parametrize("engine_model", [ENGINE_MODEL_ID, ENGINE_GEMMA_ID, ENGINE_QUALITY_ID])
def test_each_engine_model_is_priced_with_kimi_k25s_card_of_the_day_and_says_which(engine_model: str) -> None:
    before = price_card_for(model_id=engine_model, day=dt.date(2026, 5, 29))
    after = price_card_for(model_id=engine_model, day=dt.date(2026, 11, 22))

    assert before is not None and after is not None
    assert before == price_card_for(model_id=KIMI_K25, day=dt.date(2026, 5, 29))
    assert after == price_card_for(model_id=KIMI_K25, day=dt.date(2026, 11, 22))
    assert (after.input_per_m, after.cached_input_per_m, after.output_per_m) == (
        Decimal("0.95"),
        Decimal("0.16"),
        Decimal("4.00"),
    )
    assert price_card_label(model_id=engine_model, card=before, day=dt.date(2026, 5, 29)) == (
        "Priced as Kimi K2.5: Workers AI list price for Kimi K2.5 ($0.60 in / $0.10 cached / $3.00 out)"
    )
    assert price_card_label(model_id=engine_model, card=after, day=dt.date(2026, 11, 22)) == (
        "Priced as Kimi K2.5 (retired on 2026-05-30; served as Kimi K2.6 since): "
        "Workers AI list price for Kimi K2.6 ($0.95 in / $0.16 cached / $4.00 out)"
    )


def test_the_engine_models_have_no_card_of_their_own_to_go_stale() -> None:
    engine_models = [ENGINE_MODEL_ID, ENGINE_GEMMA_ID, ENGINE_QUALITY_ID]
    assert not PriceCard.objects.filter(model__model_id__in=engine_models).exists()


def test_a_retired_models_label_says_what_serves_it() -> None:
    card = price_card_for(model_id=KIMI_K25, day=dt.date(2026, 6, 1))

    assert card is not None
    assert price_card_label(model_id=KIMI_K25, card=card, day=dt.date(2026, 6, 1)) == (
        "Kimi K2.5 retired on 2026-05-30; served as Kimi K2.6 since: "
        "Workers AI list price for Kimi K2.6 ($0.95 in / $0.16 cached / $4.00 out)"
    )
    assert price_card_label(model_id=KIMI_K26, card=card, day=dt.date(2026, 6, 1)) == card.label


def test_retirement_is_told_in_the_future_before_the_day_and_in_the_past_from_it() -> None:
    k25 = CatalogModel.objects.select_related("alias_of").get(model_id=KIMI_K25)

    assert k25.retirement_text(dt.date(2026, 5, 29)) == "retires on 2026-05-30; then served as Kimi K2.6"
    assert k25.retirement_text(dt.date(2026, 5, 30)) == "retired on 2026-05-30; served as Kimi K2.6 since"
    assert CatalogModel.objects.get(model_id=KIMI_K26).retirement_text(dt.date(2026, 5, 30)) == ""


def test_a_team_override_of_the_engine_model_still_wins(actors: Any) -> None:
    engine = CatalogModel.objects.get(model_id=ENGINE_MODEL_ID)
    override = PriceCard.objects.create(
        model=engine,
        team=actors.team,
        effective_from=dt.date(2026, 1, 1),
        input_per_m=Decimal(0),
        output_per_m=Decimal(0),
        label="Free: our own CPU",
    )

    assert (
        price_card_for(model_id=ENGINE_MODEL_ID, day=dt.date(2026, 11, 22), team_id=actors.team.pk)
        == override
    )
    assert price_card_for(model_id=ENGINE_MODEL_ID, day=dt.date(2026, 11, 22)) != override


def test_the_card_in_force_on_the_day_is_chosen() -> None:
    model = CatalogModel.objects.get(model_id="@cf/openai/gpt-oss-20b")
    PriceCard.objects.create(
        model=model,
        effective_from=dt.date(2026, 10, 1),
        input_per_m=Decimal("0.25"),
        output_per_m=Decimal("0.35"),
        label="October price",
    )

    september = price_card_for(model_id=model.model_id, day=dt.date(2026, 9, 30))
    october = price_card_for(model_id=model.model_id, day=dt.date(2026, 10, 1))

    assert september is not None and september.input_per_m == Decimal("0.20")
    assert october is not None and october.label == "October price"


def test_an_unknown_model_has_no_price_card() -> None:
    assert price_card_for(model_id="@cf/nobody/nothing", day=dt.date(2026, 11, 22)) is None


def test_the_engine_kind_offers_only_the_local_models() -> None:
    assert [m.model_id for m in catalog_models_for_kind(kind="engine")] == [
        ENGINE_GEMMA_ID,
        ENGINE_QUALITY_ID,
        ENGINE_MODEL_ID,
    ]
    assert KIMI_K25 in {m.model_id for m in catalog_models_for_kind(kind="workers-ai")}


def test_current_models_come_before_deprecated_ones() -> None:
    deprecated = [m.deprecated_on is not None for m in catalog_models_for_kind(kind="workers-ai")]

    assert True in deprecated and False in deprecated
    assert deprecated == sorted(deprecated)  # every False (current) before every True
