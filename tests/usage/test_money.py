"""The one money rule: pages, messages, e-mails and chart notes write dollars alike."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.template import Context, Template

from playground.usage.money import money


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        ("0", "$0.00"),
        ("12.5", "$12.50"),
        ("1234.5", "$1,234.50"),
        ("1234567.891", "$1,234,567.89"),
        ("0.5", "$0.50"),
        ("0.0421", "$0.0421"),
        ("0.123456", "$0.123"),
        ("0.000137", "$0.000137"),
        ("0.00013749", "$0.000137"),
        ("0.0000004", "$0.0000004"),
        ("1E-10", "$0.0000000001"),
        ("0.9996", "$1.00"),
        ("0.01545", "$0.0154"),  # half to even, as Decimal
        ("-0.5", "-$0.50"),
        ("-1234.5", "-$1,234.50"),
    ],
)
def test_money_is_cents_from_a_dollar_and_three_significant_digits_below(amount: str, text: str) -> None:
    assert money(Decimal(amount)) == text


def test_money_is_never_in_scientific_notation_and_reads_floats_exactly() -> None:
    assert money(Decimal("1E-12")) == "$0.000000000001"
    assert money(0.1) == "$0.10" and money(3) == "$3.00"


def test_a_chart_fixes_the_places_and_a_difference_carries_its_sign() -> None:
    assert money(Decimal("27456.938"), places=4) == "$27,456.9380"
    assert money(Decimal("0.5"), places=4, signed=True) == "+$0.5000"
    assert money(Decimal("-1.2"), places=4, signed=True) == "-$1.2000"
    assert money(Decimal("-0.00001"), places=4, signed=True) == "$0.0000", "no sign on a shown zero"


def test_the_template_filter_writes_the_same_and_nothing_for_no_amount() -> None:
    template = Template("{% load money %}[{{ a|money }}][{{ b|money }}]")

    assert template.render(Context({"a": Decimal("0.000137"), "b": None})) == "[$0.000137][]"
