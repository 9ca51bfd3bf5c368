"""The FOCUS file against FOCUS 1.3's own column definitions, not against our expectations.

`focus_1_3_cost_and_usage.json` holds every Cost and Usage column of FOCUS 1.3 with its feature
level, nullability, format and allowed values, derived from the FinOps Foundation's data model
(its "about" says how). These tests check the header and every cell of a real export against it,
plus the cross-column rules the spec states, so a column or format the spec wants cannot go
missing unnoticed.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import pytest

from playground.analytics.focus import COLUMNS
from playground.catalog.seed import ENGINE_MODEL_ID
from playground.usage.calls.context import RequestContext
from tests.analytics.test_focus_export import DAY, focus_file
from tests.support.analytics import NOW, Known, record_write

SPEC = json.loads((Path(__file__).parent / "focus_1_3_cost_and_usage.json").read_text())
SPEC_COLUMNS: dict[str, dict[str, Any]] = SPEC["columns"]
DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
CURRENCY = re.compile(r"[A-Z]{3}")
# The Recommended columns the file leaves out, and why (each is about something we do not have).
RECOMMENDED_LEFT_OUT = {
    "AllocatedMethodDetails": "no split cost allocation",
    "AvailabilityZone": "the services are not deployed in zones",
}


def own(column: str) -> bool:
    """FOCUS's rule for columns it does not define: the `x_` prefix."""
    return column.startswith("x_")


def test_every_column_is_a_focus_1_3_column_or_ours_and_every_mandatory_one_is_there() -> None:
    assert SPEC["focus_version"] == "1.3"
    assert len(SPEC_COLUMNS) == 65  # the Cost and Usage dataset of 1.3, deprecated columns included
    assert [column for column in COLUMNS if column not in SPEC_COLUMNS and not own(column)] == []
    mandatory = {name for name, spec in SPEC_COLUMNS.items() if spec["feature_level"] == "Mandatory"}
    assert mandatory - set(COLUMNS) == set()
    recommended = {name for name, spec in SPEC_COLUMNS.items() if spec["feature_level"] == "Recommended"}
    assert recommended - set(COLUMNS) == set(RECOMMENDED_LEFT_OUT)


def test_a_condition_the_file_meets_for_one_column_it_meets_for_all_columns_under_it() -> None:
    # E.g. filling SkuId says "supports unit pricing and publishes price lists": SkuPriceId,
    # SkuMeter and SkuPriceDetails fall under the same condition and must be filled too.
    met = {
        spec["condition"]
        for name, spec in SPEC_COLUMNS.items()
        if spec["feature_level"] == "Conditional" and name in COLUMNS
    }
    owed = {
        name
        for name, spec in SPEC_COLUMNS.items()
        if spec["feature_level"] == "Conditional" and spec["condition"] in met
    }
    assert owed - set(COLUMNS) == set()


def check_cell(column: str, value: str) -> None:
    """One cell against its column's definition; an empty field is a null."""
    spec = SPEC_COLUMNS[column]
    if value == "":
        assert spec["allows_nulls"], f"{column} may not be null"
        return
    kind, form = spec["data_type"], spec["value_format"]
    if spec["allowed_values"]:
        assert value in spec["allowed_values"], (column, value)
    if kind == "Decimal":
        try:
            number = Decimal(value)
        except InvalidOperation:
            pytest.fail(f"{column}: {value!r} is not a decimal")
        assert number.is_finite() and "e" not in value.lower(), (column, value)
        # Not the spec's rule but what lets a reader that infers a CSV's types (the FinOps
        # Foundation's focus-validator does) see a Decimal rather than an integer.
        assert "." in value, (column, value)
        if form == "Decimal (non-negative)":
            assert number >= 0, (column, value)
    elif kind == "Date/Time":
        assert DATE_TIME.fullmatch(value), (column, value)
    elif form == "Currency":
        assert CURRENCY.fullmatch(value), (column, value)
    elif kind == "JSON":
        parsed = json.loads(value)
        assert isinstance(parsed, dict) and parsed, (column, value)
        if form == "Key-Value":
            assert all(isinstance(item, str | int | float | bool) for item in parsed.values()), value
        if column == "SkuPriceDetails":  # keys FOCUS does not define carry its `x_` prefix
            assert all(own(key) for key in parsed), value


def when(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")


def check_row(row: dict[str, str]) -> None:
    for column in COLUMNS:
        if column in SPEC_COLUMNS:
            check_cell(column, row[column])
    # Cross-column rules of the spec.
    assert when(row["ChargePeriodStart"]) < when(row["ChargePeriodEnd"])
    assert when(row["BillingPeriodStart"]) <= when(row["ChargePeriodStart"])
    assert when(row["ChargePeriodEnd"]) <= when(row["BillingPeriodEnd"])
    quantity = Decimal(row["PricingQuantity"])
    assert Decimal(row["ListCost"]) == Decimal(row["ListUnitPrice"]) * quantity
    assert Decimal(row["ContractedCost"]) == Decimal(row["ContractedUnitPrice"]) * quantity
    assert SPEC["service_subcategory_parents"][row["ServiceSubcategory"]] == row["ServiceCategory"]
    if row["ChargeCategory"] == "Usage" and row["ChargeClass"] != "Correction":
        assert row["ConsumedQuantity"] and row["ConsumedUnit"]
    assert bool(row["SkuPriceId"]) == bool(row["SkuPriceDetails"])


def test_every_cell_of_a_real_export_keeps_its_columns_rules(actors: Any, known: Known) -> None:
    # The known records (priced by the catalogue's cards, cached share reported or not), one on
    # a model no card prices, whose row has no SKU price.
    unpriced = RequestContext(
        team_id=actors.team.pk, user_id=actors.owner.pk, connection_id=None, model_id="@cf/acme/no-card"
    )
    record_write(NOW.replace(hour=9), unpriced, prompt=40, cached=0, out=4, ttft=10, latency=20)
    # and one whose provider reported cache writes, for the cache_write row
    engine = RequestContext(
        team_id=actors.team.pk, user_id=actors.owner.pk, connection_id=None, model_id=ENGINE_MODEL_ID
    )
    record_write(
        NOW.replace(hour=9, minute=30), engine, prompt=60, cached=10, written=30, out=2, ttft=10, latency=20
    )
    rows = focus_file(actors.owner, team=actors.team.pk, **DAY)

    assert {row["x_TokenKind"] for row in rows} >= {"input", "cached_input", "cache_write", "output"}
    assert any(row["SkuPriceId"] == "" for row in rows)
    assert any(row["SkuId"].startswith(f"{ENGINE_MODEL_ID}:") for row in rows)
    for row in rows:
        check_row(row)
