"""The FOCUS 1.3 export: the known rows of tests/support/analytics.py, column by column."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse

from playground.analytics.focus import COLUMNS
from playground.analytics.selectors.totals import headline
from playground.catalog.models import PriceCard
from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K26
from playground.usage.calls.context import RequestContext
from tests.support.analytics import NOW, Known, filters_for, record_write
from tests.support.clients import client_for
from tests.support.clock import clock

DAY = {"range": "custom", "start": "2026-11-20", "end": "2026-11-20"}


def focus_file(actor: Any, **params: Any) -> list[dict[str, str]]:
    with clock(NOW):
        response = client_for(actor).get(reverse("analytics:focus-export"), params)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/csv")
    text = response.content.decode()
    assert text.splitlines()[0] == ",".join(COLUMNS)
    return list(csv.DictReader(io.StringIO(text)))


def expected_row(
    actors: Any, *, model: str, card: PriceCard, kind: str, meter: str, tokens: int, price: str, cost: str
) -> dict[str, str]:
    """One row as the spec and docs/usage-analytics.md say it should be, written out by hand."""
    team = actors.team
    per_million = format((Decimal(price) * 1_000_000).normalize(), "f")  # "0.6", "3"
    per_million = per_million if "." in per_million else f"{per_million}.0"
    return {
        "BilledCost": cost,
        "BillingAccountId": f"team-{team.pk}",
        "BillingAccountName": team.name,
        "BillingCurrency": "USD",
        "BillingPeriodEnd": "2026-12-01T00:00:00Z",
        "BillingPeriodStart": "2026-11-01T00:00:00Z",
        "ChargeCategory": "Usage",
        "ChargeClass": "",
        "ChargeDescription": f"{meter} of {model}, priced by {card.label}",
        "ChargeFrequency": "Usage-Based",
        "ChargePeriodEnd": "2026-11-21T00:00:00Z",
        "ChargePeriodStart": "2026-11-20T00:00:00Z",
        "ConsumedQuantity": str(tokens),
        "ConsumedUnit": "Tokens",
        "ContractedCost": cost,
        "ContractedUnitPrice": price,
        "EffectiveCost": cost,
        "HostProviderName": "Inference Playground",
        "InvoiceIssuerName": "Inference Playground",
        "ListCost": cost,
        "ListUnitPrice": price,
        "PricingCategory": "Standard",
        "PricingQuantity": str(tokens),
        "PricingUnit": "Tokens",
        "ProviderName": "Inference Playground",
        "PublisherName": "Inference Playground",
        "ServiceCategory": "AI and Machine Learning",
        "ServiceName": "Inference Playground",
        "ServiceProviderName": "Inference Playground",
        "ServiceSubcategory": "Generative AI",
        "SkuId": f"{model}:{kind}",
        "SkuMeter": meter,
        "SkuPriceDetails": json.dumps(
            {
                "x_PriceCard": card.label,
                "x_TokenKind": kind,
                "x_UnitPricePerMillionTokens": per_million,
            },
            separators=(",", ":"),
        ),
        "SkuPriceId": f"price-card-{card.pk}:{kind}",
        "SubAccountId": f"team-{team.pk}",
        "SubAccountName": team.name,
        "Tags": f'{{"playground/team":"{team.slug}","playground/token-kind":"{kind}"}}',
        "x_TokenKind": kind,
        "x_PriceCardLabel": card.label,
    }


def as_decimal(text: str) -> Decimal:
    return Decimal(text)


def test_the_focus_file_of_a_day_is_one_row_per_model_card_and_token_kind(actors: Any, known: Known) -> None:
    engine_card = PriceCard.objects.get(model__model_id=ENGINE_MODEL_ID, team=None)
    kimi_card = PriceCard.objects.filter(model__model_id=KIMI_K26, team=None).order_by("-effective_from")[0]
    rows = focus_file(actors.owner, team=actors.team.pk, **DAY)

    # Kimi K2.6 (record 3): 10,000 fresh (cached not reported), no cached row, 1,000 out.
    # The engine (records 1 and 2): 500 + 1,000 fresh, 1,500 cached, 100 + 200 out.
    expected = [
        (KIMI_K26, kimi_card, "input", "Input tokens", 10000, "0.00000095", "0.0095"),
        (KIMI_K26, kimi_card, "output", "Output tokens", 1000, "0.000004", "0.004"),
        (ENGINE_MODEL_ID, engine_card, "input", "Input tokens", 1500, "0.0000006", "0.0009"),
        (ENGINE_MODEL_ID, engine_card, "cached_input", "Cached input tokens", 1500, "0.0000001", "0.00015"),
        (ENGINE_MODEL_ID, engine_card, "output", "Output tokens", 300, "0.000003", "0.0009"),
    ]
    assert len(rows) == len(expected)
    for row, (model, card, kind, meter, tokens, price, cost) in zip(rows, expected, strict=True):
        want = expected_row(
            actors, model=model, card=card, kind=kind, meter=meter, tokens=tokens, price=price, cost=cost
        )
        for column in COLUMNS:
            got = row[column]
            if column.endswith(("Cost", "Price", "Quantity")):
                assert as_decimal(got) == as_decimal(want[column]), (kind, column, got)
            else:
                assert got == want[column], (kind, column, got)
    assert sum(as_decimal(row["BilledCost"]) for row in rows) == Decimal("0.01545")


@pytest.mark.parametrize("period", [{"range": "24h"}, {"range": "7d"}, {"range": "30d"}, DAY])
def test_billed_cost_adds_up_to_the_dashboards_cost_for_the_period(
    actors: Any, known: Known, period: dict[str, str]
) -> None:
    # A card whose prices need the records' 1e-10 rounding, on a record outside the known hours.
    card = PriceCard.objects.create(
        model_id=PriceCard.objects.get(model__model_id=ENGINE_MODEL_ID, team=None).model_id,
        team=actors.team,
        effective_from=NOW.date(),
        input_per_m=Decimal("0.123457"),
        cached_input_per_m=Decimal("0.011111"),
        cache_write_input_per_m=Decimal("0.154321"),
        output_per_m=Decimal("1.333333"),
        label="Negotiated",
    )
    for tokens in (7, 13, 29):
        context = RequestContext(
            team_id=actors.team.pk, user_id=actors.owner.pk, connection_id=None, model_id=ENGINE_MODEL_ID
        )
        at = NOW.replace(hour=11, minute=tokens)
        record_write(
            at, context, prompt=tokens * 4, cached=tokens, written=tokens, out=tokens, ttft=100, latency=200
        )
    rows = focus_file(actors.owner, team=actors.team.pk, **period)
    dashboard = headline(filters_for(actors.owner, team=str(actors.team.pk), **period)).totals.cost

    assert dashboard > Decimal("0.01545")
    assert sum(as_decimal(row["BilledCost"]) for row in rows) == dashboard
    negotiated = [row for row in rows if row["SkuPriceId"].startswith(f"price-card-{card.pk}:")]
    assert {row["x_TokenKind"] for row in negotiated} == {"input", "cached_input", "cache_write", "output"}
    # The list price is the public card's; the contracted one is the team's.
    fresh = next(row for row in negotiated if row["x_TokenKind"] == "input")
    assert as_decimal(fresh["ContractedUnitPrice"]) == Decimal("0.000000123457")
    assert as_decimal(fresh["ListUnitPrice"]) == Decimal("0.0000006")
    assert as_decimal(fresh["ListCost"]) == Decimal("0.0000006") * 98
    writes = next(row for row in negotiated if row["x_TokenKind"] == "cache_write")
    assert writes["SkuMeter"] == "Cache write tokens"
    assert as_decimal(writes["ConsumedQuantity"]) == 49
    assert as_decimal(writes["ContractedUnitPrice"]) == Decimal("0.000000154321")
    # the public card has no cache-write price: writes list at its input price
    assert as_decimal(writes["ListUnitPrice"]) == Decimal("0.0000006")


def test_a_period_that_starts_on_the_hour_starts_its_first_charge_there(actors: Any, known: Known) -> None:
    context = RequestContext(
        team_id=actors.team.pk, user_id=actors.owner.pk, connection_id=None, model_id=ENGINE_MODEL_ID
    )
    # The 24-hour period runs from 2026-11-19 12:00 to 2026-11-20 12:00: the 19th's charge is
    # its last twelve hours, and a record before them is outside the period.
    record_write(NOW.replace(day=19, hour=14), context, prompt=10, cached=0, out=1, ttft=1, latency=2)
    record_write(NOW.replace(day=19, hour=11), context, prompt=20, cached=0, out=2, ttft=1, latency=2)
    rows = focus_file(actors.owner, team=actors.team.pk, range="24h")

    periods = {(row["ChargePeriodStart"], row["ChargePeriodEnd"]) for row in rows}
    assert periods == {
        ("2026-11-19T12:00:00Z", "2026-11-20T00:00:00Z"),
        ("2026-11-20T00:00:00Z", "2026-11-20T12:00:00Z"),
    }
    first_day = [row for row in rows if row["ChargePeriodStart"].startswith("2026-11-19")]
    assert {(row["x_TokenKind"], row["ConsumedQuantity"]) for row in first_day} == {
        ("input", "10.0"),
        ("output", "1.0"),
    }


def test_another_teams_rows_are_never_in_the_file(actors: Any, known: Known) -> None:
    rows = focus_file(actors.outsider, **DAY)

    assert {row["SubAccountId"] for row in rows} == {f"team-{actors.other_team.pk}"}
    assert (
        sum(as_decimal(row["BilledCost"]) for row in rows)
        == headline(filters_for(actors.outsider, **DAY)).totals.cost
    )


def test_filters_the_rollups_do_not_hold_are_refused_with_the_reason(actors: Any, known: Known) -> None:
    with clock(NOW):
        response = client_for(actors.owner).get(
            reverse("analytics:focus-export"), {"team": actors.team.pk, "range": "24h", "tag": "prod"}
        )
        log = client_for(actors.owner).get(reverse("analytics:log"), {"range": "24h", "tag": "prod"})

    assert response.status_code == 400
    assert b"do not hold the tag filter" in response.content
    assert b"do not hold the tag filter" in log.content
    assert reverse("analytics:focus-export").encode() not in log.content
