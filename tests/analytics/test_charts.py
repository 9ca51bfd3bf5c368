"""Pure chart functions: rows in, Plotly figure data out (validated by the plotly package itself)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import plotly.graph_objects as go
import pytest

from playground.analytics import charts
from playground.analytics.histograms import percentile
from playground.usage.insights.cache_breaks import CAUSE_LABELS, Cause
from playground.usage.money import money

B0 = dt.datetime(2026, 11, 20, 9, tzinfo=dt.UTC)
B1 = dt.datetime(2026, 11, 20, 10, tzinfo=dt.UTC)
B2 = dt.datetime(2026, 11, 20, 11, tzinfo=dt.UTC)
BUCKETS = [B0, B1, B2]


def valid(chart: charts.Chart) -> go.Figure:
    return go.Figure(chart.figure)  # raises on any attribute plotly.js would not understand


def test_cost_is_stacked_per_group_with_zero_for_quiet_buckets_and_the_biggest_first() -> None:
    rows = [
        {"bucket": B0, "key": "a", "label": "Model A", "cost": Decimal("0.5")},
        {"bucket": B2, "key": "a", "label": "Model A", "cost": Decimal("0.25")},
        {"bucket": B1, "key": "b", "label": "Model B", "cost": Decimal("2")},
    ]

    chart = charts.cost_over_time(rows, buckets=BUCKETS, group_label="Model")

    figure = valid(chart)
    assert figure.layout.barmode == "stack"
    assert [(t["name"], t["y"]) for t in chart.figure["data"]] == [
        ("Model B", [0, 2.0, 0]),
        ("Model A", [0.5, 0, 0.25]),
    ]
    assert chart.table.rows[1] == ["2026-11-20 10:00", Decimal("2"), 0, Decimal("2")]


def test_fresh_and_cached_tokens_share_a_second_axis_line() -> None:
    rows = [{"bucket": B0, "fresh": 100, "cached": 300, "share": 0.75}]

    chart = charts.tokens_fresh_vs_cached(rows, buckets=BUCKETS)

    valid(chart)
    fresh, cached, share = chart.figure["data"]
    assert fresh["y"] == [100, 0, 0] and cached["y"] == [300, 0, 0]
    assert share["y"] == [0.75, None, None] and share["yaxis"] == "y2"


def test_cache_hit_ratio_has_one_line_per_affinity_setting_with_gaps_not_zeros() -> None:
    rows = [
        {"bucket": B0, "affinity": True, "ratio": 0.8, "requests": 3},
        {"bucket": B1, "affinity": False, "ratio": 0.1, "requests": 1},
    ]

    chart = charts.cache_hit_ratio(rows, buckets=BUCKETS)

    valid(chart)
    assert [(t["name"], t["y"]) for t in chart.figure["data"]] == [
        ("Affinity on", [0.8, None, None]),
        ("Affinity off", [None, 0.1, None]),
    ]


def test_savings_total_is_in_the_note_and_extra() -> None:
    rows = [{"bucket": B0, "would_cost": Decimal("0.9"), "cost": Decimal("0.15"), "savings": Decimal("0.75")}]

    chart = charts.savings(rows, buckets=BUCKETS)

    valid(chart)
    assert chart.extra["total"] == Decimal("0.75") and "$0.7500" in chart.note


def test_ttft_has_p50_and_p95_lines_for_hits_and_misses() -> None:
    rows = [{"bucket": B1, "cache_state": "miss", "p50": 875.0, "p95": 987.5, "requests": 1}]

    chart = charts.ttft_by_cache(rows, buckets=BUCKETS)

    valid(chart)
    lines = {t["name"]: t["y"] for t in chart.figure["data"]}
    assert lines["Cache miss p50"] == [None, 875.0, None] and lines["Cache hit p95"] == [None, None, None]


def test_latency_distribution_is_a_bar_per_fixed_bucket() -> None:
    counts = [0] * 20
    counts[9] = 2
    chart = charts.latency_distribution({"counts": counts, "p50": 1250.0, "p95": 1475.0, "p99": 1495.0})

    valid(chart)
    assert chart.figure["data"][0]["x"][9] == "1 s-1.5 s" and chart.figure["data"][0]["y"][9] == 2
    assert chart.note == "p50 1.25 s, p95 1.48 s, p99 1.50 s."


def test_requests_by_status_puts_ok_first_and_colours_errors_red() -> None:
    rows = [
        {"bucket": B0, "status": "upstream_error", "requests": 1},
        {"bucket": B0, "status": "ok", "requests": 4},
    ]

    chart = charts.requests_by_status(rows, buckets=BUCKETS)

    valid(chart)
    assert [t["name"] for t in chart.figure["data"]] == ["ok", "upstream_error"]
    assert chart.figure["data"][1]["marker"]["color"] == charts.STATUS_COLORS["upstream_error"]


def test_top_conversations_put_the_costliest_on_top() -> None:
    figures = {"requests": 1, "prompt_tokens": 5, "cached_tokens": 0}
    rows = [
        {"conversation_id": 1, "title": "Big", "cost": Decimal("3"), **figures},
        {"conversation_id": 2, "title": "Small", "cost": Decimal("1"), **figures},
    ]

    chart = charts.top_conversations(rows)

    valid(chart)
    assert chart.figure["data"][0]["y"] == ["#2 Small", "#1 Big"]  # plotly draws the last category on top
    assert chart.table.rows[0][0] == 1


def test_prompt_growth_labels_each_session_with_the_growth_its_runway_uses() -> None:
    sessions = [
        {"conversation_id": 7, "title": "Chat", "turns": [100, 300, 500, 200, 400, 1600]},  # an edit, a paste
        {"conversation_id": 8, "title": "One turn", "turns": [900]},
    ]
    chart = charts.prompt_growth(sessions)

    valid(chart)
    assert chart.figure["data"][0]["name"] == "#7 Chat (+200/turn)"  # the median of +200, +200, +200, +1,200
    assert chart.figure["data"][1]["name"] == "#8 One turn"
    assert chart.table.rows[0][3] == 200


def test_what_if_puts_actual_and_repriced_side_by_side_with_the_difference() -> None:
    rows = [
        {"model_id": "m", "prompt_tokens": 1, "cached_tokens": 0, "completion_tokens": 1,
         "actual": Decimal("1.5"), "repriced": Decimal("2"), "difference": Decimal("0.5")},
    ]  # fmt: skip

    chart = charts.what_if(rows, target_label="Kimi K2.6")

    valid(chart)
    assert [t["name"] for t in chart.figure["data"]] == ["Actual", "Kimi K2.6"]
    assert chart.extra["difference"] == Decimal("0.5") and "difference +$0.5000" in chart.note


@pytest.mark.parametrize(
    ("amount", "signed", "expected"),
    [(Decimal("27456.938"), False, "$27,456.9380"), (Decimal("27456.938"), True, "+$27,456.9380"),
     (Decimal("-1234.5"), True, "-$1,234.5000"), (Decimal(0), True, "$0.0000")],
)  # fmt: skip
def test_a_notes_money_keeps_the_charts_places_groups_thousands_and_puts_the_sign_first(
    amount: Decimal, signed: bool, expected: str
) -> None:
    assert money(amount, signed=signed, places=4) == expected


@pytest.mark.parametrize(
    ("amounts", "smallest", "expected"),
    [([Decimal("27456.9")], False, 4), ([Decimal("0.01")], False, 4), ([Decimal("0.00066")], False, 5),
     ([Decimal("0.000032"), 0], False, 6), ([], False, 4), ([0, None], False, 4),
     ([Decimal(5), Decimal("0.00003")], False, 4), ([Decimal(5), Decimal("0.00003")], True, 6),
     ([Decimal("1e-12")], False, 8)],
)  # fmt: skip
def test_money_places_give_sub_cent_amounts_two_significant_digits(
    amounts: list[Decimal], smallest: bool, expected: int
) -> None:
    assert charts.money_places(amounts, smallest=smallest) == expected


def test_a_sub_cent_period_reads_in_axes_hovers_and_notes_instead_of_rounding_to_zero() -> None:
    """A day on the embedded engine costs hundredths of a cent: four places drew every savings
    tick as $0 and noted 'difference +$0.0000'."""
    savings = charts.savings(
        [{"bucket": B0, "savings": Decimal("0.000032"), "cost": Decimal("0.0000064"),
          "would_cost": Decimal("0.0000384")}],
        buckets=BUCKETS,
    )  # fmt: skip
    what_if = charts.what_if(
        [{"model_id": "m", "prompt_tokens": 194, "cached_tokens": 64, "completion_tokens": 192,
          "actual": Decimal("0.00066"), "repriced": Decimal("0.000692"), "difference": Decimal("0.000032")}],
        target_label="No cache discount",
    )  # fmt: skip

    valid(savings), valid(what_if)
    assert savings.figure["layout"]["yaxis"]["tickformat"] == "$,.6~f"
    assert savings.figure["data"][0]["hovertemplate"].startswith("%{y:$,.6f}")
    assert "Saved over the period: $0.000032:" in savings.note
    assert what_if.figure["layout"]["yaxis"]["tickformat"] == "$,.5~f"
    assert what_if.note == "Actual $0.000660, re-priced $0.000692, difference +$0.000032."


@pytest.mark.parametrize(
    ("counts", "q", "expected"),
    [([0, 4], 50, 50 + 25.0), ([2, 2], 50, 50.0), ([0] * 19 + [3], 95, 60000.0), ([0, 0], 50, None)],
)
def test_percentiles_interpolate_inside_a_bucket_and_floor_the_open_one(
    counts: list[int], q: float, expected: float | None
) -> None:
    counts = counts + [0] * (20 - len(counts)) if len(counts) < 20 else counts
    assert percentile(counts, q) == expected


def test_the_cache_break_note_names_every_cause_the_bars_show_costliest_first() -> None:
    """Five causes stacked: the words account for each of them, not the three costliest."""
    start = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    buckets = [start + dt.timedelta(hours=h) for h in range(3)]
    losses = {
        Cause.EVICTED: ("0.004", 3),
        Cause.SYSTEM_CHANGED: ("0.003", 2),
        Cause.TOOLS_CHANGED: ("0.002", 1),
        Cause.AFFINITY_MISSING: ("0.001", 1),
        Cause.ROUTE_CHANGED: ("0.0005", 1),
    }
    rows = [
        {"bucket": buckets[i % 3], "cause": cause, "breaks": breaks, "lost": Decimal(lost)}
        for i, (cause, (lost, breaks)) in enumerate(losses.items())
    ]

    chart = charts.cache_breaks(rows, buckets=buckets)

    named = [CAUSE_LABELS[cause].lower() for cause in losses]
    positions = [chart.note.index(f"{name} $") for name in named]
    assert positions == sorted(positions), "costliest first"
    assert chart.note.startswith("8 breaks lost $0.01050 of cache savings: ")
    assert f"{named[0]} $0.00400 (3)" in chart.note and f"{named[4]} $0.00050 (1)" in chart.note
