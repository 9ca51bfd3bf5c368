from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K25, KIMI_K26
from playground.catalog.selectors import catalog_models_for_kind, price_card_for

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


def test_the_engine_model_is_priced_like_kimi_k25_and_says_so() -> None:
    card = price_card_for(model_id=ENGINE_MODEL_ID, day=dt.date(2026, 11, 22))

    assert card is not None
    assert (card.input_per_m, card.cached_input_per_m, card.output_per_m) == (
        Decimal("0.60"),
        Decimal("0.10"),
        Decimal("3.00"),
    )
    assert "Kimi K2.5" in card.label


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


def test_the_engine_kind_offers_only_the_local_model() -> None:
    assert [m.model_id for m in catalog_models_for_kind(kind="engine")] == [ENGINE_MODEL_ID]
    assert KIMI_K25 in {m.model_id for m in catalog_models_for_kind(kind="workers-ai")}


def test_current_models_come_before_deprecated_ones() -> None:
    deprecated = [m.deprecated_on is not None for m in catalog_models_for_kind(kind="workers-ai")]

    assert True in deprecated and False in deprecated
    assert deprecated == sorted(deprecated)  # every False (current) before every True
