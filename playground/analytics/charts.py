"""Selector rows in, Plotly figure dicts out: pure functions, no database, no request.

Each function returns a `Chart`: the figure (`{"data": [...], "layout": {...}}`, the JSON
plotly.js draws) and the same figures as a table for "show as table". Times are UTC.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from playground.analytics.histograms import bucket_labels
from playground.usage.insights.cache_breaks import CAUSE_LABELS, Cause
from playground.usage.insights.runway import prompt_growth_per_turn
from playground.usage.money import money

PALETTE = ["#3b5bdb", "#f08c00", "#2b8a3e", "#c92a2a", "#7048e8", "#0c8599", "#e64980", "#5c940d", "#868e96"]
FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif'
STATUS_COLORS = {
    "ok": "#2b8a3e",
    "upstream_error": "#c92a2a",
    "timeout": "#f08c00",
    "client_disconnected": "#868e96",
    "rejected": "#7048e8",
}


@dataclass(frozen=True)
class Table:
    columns: list[str]
    rows: list[list[Any]]

    @property
    def figure_columns(self) -> frozenset[int]:
        """The columns holding only numbers (or nothing): right-aligned, never wrapped."""
        return frozenset(
            index
            for index in range(len(self.columns))
            if all(row[index] is None or isinstance(row[index], int | float | Decimal) for row in self.rows)
        )


@dataclass(frozen=True)
class Chart:
    figure: dict[str, Any]
    table: Table
    note: str = ""
    empty: bool = False
    empty_text: str = ""  # what an empty chart says, when not "No requests in this period."
    extra: dict[str, Any] = field(default_factory=dict)


def money_places(amounts: Iterable[Decimal | float | int | None], *, smallest: bool = False) -> int:
    """Decimal places for amounts shown together: four, or enough for two significant digits
    when the amount that sets the scale is under a cent (a day on a small model costs a few
    hundredths of a cent, which four places show as $0.0000). The scale is set by the largest
    amount (an axis, whose ticks divide it), or with `smallest` by the smallest non-zero one
    (a note, where a small difference beside a large total must still read)."""
    sizes = [abs(Decimal(amount)) for amount in amounts if amount]
    if not sizes:
        return 4
    scale = min(sizes) if smallest else max(sizes)
    return 4 if scale >= Decimal("0.01") else min(8, -scale.adjusted() + 1)


def _money_axis(places: int) -> str:
    return f"$,.{places}~f"


def _money_hover(axis: str, places: int, *, named: bool = True) -> str:
    """A hover label with the amount and, when `named`, the trace's name beside it."""
    return f"%{{{axis}:$,.{places}f}}<extra>{'%{fullData.name}' if named else ''}</extra>"


def _layout(
    *, y_title: str, x_title: str = "", y_format: str = "", barmode: str = "", **more: Any
) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "font": {"family": FONT, "size": 12, "color": "#1c2230"},
        "margin": {"l": 60, "r": 20, "t": 30, "b": 40},
        "height": 300,
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom", "font": {"size": 11}},
        "hovermode": "x unified",
        "xaxis": {"title": {"text": x_title}, "gridcolor": "#f0f2f5", "linecolor": "#cfd4dc"},
        "yaxis": {
            "title": {"text": y_title},
            "gridcolor": "#f0f2f5",
            "rangemode": "tozero",
            "tickformat": y_format,
        },
        "colorway": PALETTE,
    }
    if barmode:
        layout["barmode"] = barmode
    layout.update(more)
    return layout


def _iso(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M")


def _num(value: Decimal | float | int | None) -> float | None:
    return None if value is None else float(value)


def _series(
    rows: Iterable[dict[str, Any]], *, buckets: Sequence[dt.datetime], key: str, value: str
) -> dict[Any, list[Any]]:
    """{series key: [value per bucket]}, zero where a bucket has no row."""
    index = {at: i for i, at in enumerate(buckets)}
    series: dict[Any, list[Any]] = {}
    for row in rows:
        values = series.setdefault(row[key], [0] * len(buckets))
        position = index.get(row["bucket"])
        if position is not None:
            values[position] += row[value]
    return series


def cost_over_time(rows: list[dict[str, Any]], *, buckets: Sequence[dt.datetime], group_label: str) -> Chart:
    labels = {row["key"]: row["label"] for row in rows}
    series = _series(rows, buckets=buckets, key="key", value="cost")
    order = sorted(series, key=lambda key: -sum(series[key]))
    x = [_iso(at) for at in buckets]
    totals = [sum((series[key][i] for key in order), Decimal(0)) for i in range(len(buckets))]
    places = money_places(totals)
    data = [
        {
            "type": "bar",
            "name": labels[key],
            "x": x,
            "y": [_num(value) for value in series[key]],
            "hovertemplate": _money_hover("y", places),
        }
        for key in order
    ]
    table = Table(
        ["Bucket (UTC)", *(labels[key] for key in order), "Total (USD)"],
        [[x[i], *(series[key][i] for key in order), totals[i]] for i in range(len(buckets))],
    )
    layout = _layout(y_title="USD", y_format=_money_axis(places), barmode="stack")
    return Chart(
        figure={"data": data, "layout": layout},
        table=table,
        note=f"Stacked by {group_label.lower()}.",
        empty=not rows,
    )


def tokens_fresh_vs_cached(rows: list[dict[str, Any]], *, buckets: Sequence[dt.datetime]) -> Chart:
    by_bucket = {row["bucket"]: row for row in rows}
    x = [_iso(at) for at in buckets]
    fresh = [by_bucket[at]["fresh"] if at in by_bucket else 0 for at in buckets]
    cached = [by_bucket[at]["cached"] if at in by_bucket else 0 for at in buckets]
    share = [by_bucket[at]["share"] if at in by_bucket else None for at in buckets]
    data = [
        {"type": "bar", "name": "Fresh input", "x": x, "y": fresh, "marker": {"color": PALETTE[0]}},
        {"type": "bar", "name": "Cached input", "x": x, "y": cached, "marker": {"color": PALETTE[2]}},
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "Cached share",
            "x": x,
            "y": share,
            "yaxis": "y2",
            "line": {"color": PALETTE[1], "width": 2},
            "connectgaps": False,
            "hovertemplate": "%{y:.1%}<extra>Cached share</extra>",
        },
    ]
    layout = _layout(
        y_title="Input tokens",
        barmode="stack",
        yaxis2={"overlaying": "y", "side": "right", "range": [0, 1], "tickformat": ".0%", "showgrid": False},
    )
    layout["margin"]["r"] = 50
    table = Table(
        ["Bucket (UTC)", "Fresh input tokens", "Cached input tokens", "Cached share"],
        [[x[i], fresh[i], cached[i], share[i]] for i in range(len(buckets))],
    )
    return Chart(figure={"data": data, "layout": layout}, table=table, empty=not rows)


def cache_hit_ratio(rows: list[dict[str, Any]], *, buckets: Sequence[dt.datetime]) -> Chart:
    x = [_iso(at) for at in buckets]
    index = {at: i for i, at in enumerate(buckets)}
    ratios: dict[bool, list[float | None]] = {True: [None] * len(buckets), False: [None] * len(buckets)}
    for row in rows:
        if row["bucket"] in index:
            ratios[row["affinity"]][index[row["bucket"]]] = row["ratio"]
    data = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": name,
            "x": x,
            "y": ratios[on],
            "line": {"color": color, "width": 2},
            "connectgaps": False,
            "hovertemplate": "%{y:.1%}<extra>" + name + "</extra>",
        }
        for on, name, color in ((True, "Affinity on", PALETTE[0]), (False, "Affinity off", PALETTE[1]))
    ]
    layout = _layout(y_title="Cached / prompt tokens", y_format=".0%")
    layout["yaxis"]["range"] = [0, 1]
    table = Table(
        ["Bucket (UTC)", "Affinity on", "Affinity off"],
        [[x[i], ratios[True][i], ratios[False][i]] for i in range(len(x))],
    )
    return Chart(
        figure={"data": data, "layout": layout},
        table=table,
        note="Only requests whose provider reported a cache figure count.",
        empty=not rows,
    )


def savings(rows: list[dict[str, Any]], *, buckets: Sequence[dt.datetime]) -> Chart:
    by_bucket = {row["bucket"]: row for row in rows}
    x = [_iso(at) for at in buckets]
    saved = [by_bucket[at]["savings"] if at in by_bucket else Decimal(0) for at in buckets]
    paid = [by_bucket[at]["cost"] if at in by_bucket else Decimal(0) for at in buckets]
    would = [by_bucket[at]["would_cost"] if at in by_bucket else Decimal(0) for at in buckets]
    places = money_places(p + s for p, s in zip(paid, saved, strict=True))
    hover = _money_hover("y", places)
    data = [
        {
            "type": "bar",
            "name": "Paid for cached tokens",
            "x": x,
            "y": [_num(v) for v in paid],
            "marker": {"color": PALETTE[8]},
            "hovertemplate": hover,
        },
        {
            "type": "bar",
            "name": "Saved by caching",
            "x": x,
            "y": [_num(v) for v in saved],
            "marker": {"color": PALETTE[2]},
            "hovertemplate": hover,
        },
    ]
    total = sum(saved, Decimal(0))
    table = Table(
        ["Bucket (UTC)", "At the input price (USD)", "Paid (USD)", "Saved (USD)"],
        [[x[i], would[i], paid[i], saved[i]] for i in range(len(x))],
    )
    layout = _layout(y_title="USD", y_format=_money_axis(places), barmode="stack")
    return Chart(
        figure={"data": data, "layout": layout},
        table=table,
        note=f"Saved over the period: {money(total, places=money_places([total]))}: what the cached "
        "tokens would have cost at each "
        "card's input price, minus what they cost.",
        empty=not rows,
        extra={"total": total},
    )


def ttft_by_cache(rows: list[dict[str, Any]], *, buckets: Sequence[dt.datetime]) -> Chart:
    x = [_iso(at) for at in buckets]
    index = {at: i for i, at in enumerate(buckets)}
    lines: dict[tuple[str, str], list[float | None]] = {}
    for state in ("hit", "miss"):
        for q in ("p50", "p95"):
            lines[(state, q)] = [None] * len(buckets)
    for row in rows:
        if row["bucket"] in index:
            for q in ("p50", "p95"):
                lines[(row["cache_state"], q)][index[row["bucket"]]] = row[q]
    colors = {"hit": PALETTE[2], "miss": PALETTE[3]}
    data = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": f"Cache {state} {q}",
            "x": x,
            "y": lines[(state, q)],
            "line": {"color": colors[state], "width": 2, "dash": "solid" if q == "p50" else "dot"},
            "connectgaps": False,
            "hovertemplate": "%{y:.0f} ms<extra>%{fullData.name}</extra>",
        }
        for state in ("hit", "miss")
        for q in ("p50", "p95")
    ]
    table = Table(
        ["Bucket (UTC)", "Hit p50 (ms)", "Hit p95 (ms)", "Miss p50 (ms)", "Miss p95 (ms)"],
        [[x[i], *(lines[(s, q)][i] for s in ("hit", "miss") for q in ("p50", "p95"))] for i in range(len(x))],
    )
    return Chart(
        figure={"data": data, "layout": _layout(y_title="Time to first token (ms)")},
        table=table,
        note="Percentiles from fixed histogram buckets: exact to the bucket's width.",
        empty=not rows,
    )


def latency_distribution(result: dict[str, Any]) -> Chart:
    labels = bucket_labels()
    counts = result["counts"]
    data = [
        {
            "type": "bar",
            "name": "Requests",
            "x": labels,
            "y": counts,
            "marker": {"color": PALETTE[0]},
            "hovertemplate": "%{y} requests<extra>%{x}</extra>",
        }
    ]
    layout = _layout(y_title="Requests", hovermode="closest", showlegend=False)
    layout["xaxis"].update({"type": "category", "tickangle": -45, "automargin": True})
    marks = ", ".join(
        f"{name} {milliseconds(result[name])}" for name in ("p50", "p95", "p99") if result[name] is not None
    )
    return Chart(
        figure={"data": data, "layout": layout},
        table=Table(
            ["Latency", "Requests"], [[label, count] for label, count in zip(labels, counts, strict=True)]
        ),
        note=f"{marks}." if marks else "",
        empty=not any(counts),
        extra={key: result[key] for key in ("p50", "p95", "p99")},
    )


def milliseconds(value: float) -> str:
    """A duration as read: "420 ms", "2.50 s"."""
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


def requests_by_status(rows: list[dict[str, Any]], *, buckets: Sequence[dt.datetime]) -> Chart:
    series = _series(rows, buckets=buckets, key="status", value="requests")
    x = [_iso(at) for at in buckets]
    order = sorted(series, key=lambda status: (status != "ok", status))
    data = [
        {
            "type": "bar",
            "name": status,
            "x": x,
            "y": series[status],
            "marker": {"color": STATUS_COLORS.get(status, PALETTE[8])},
        }
        for status in order
    ]
    table = Table(["Bucket (UTC)", *order], [[x[i], *(series[s][i] for s in order)] for i in range(len(x))])
    return Chart(
        figure={"data": data, "layout": _layout(y_title="Requests", barmode="stack")},
        table=table,
        empty=not rows,
    )


def _cost_bars(rows: list[dict[str, Any]], *, y: list[str], color: str | list[str]) -> dict[str, Any]:
    """Horizontal bars of the rows' costs, the first row on top (plotly draws the last
    category on top), each hovered with its cost and requests."""
    places = money_places(row["cost"] for row in rows)
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": "Cost",
            "x": [_num(row["cost"]) for row in reversed(rows)],
            "y": y[::-1],
            "customdata": [row["requests"] for row in reversed(rows)],
            "marker": {"color": color[::-1] if isinstance(color, list) else color},
            "hovertemplate": f"%{{x:$,.{places}f}} · %{{customdata:,}} requests<extra></extra>",
        }
    ]
    layout = _layout(y_title="", hovermode="closest", showlegend=False)
    layout["xaxis"]["tickformat"] = _money_axis(places)
    layout["yaxis"] = {"automargin": True, "type": "category"}
    layout["margin"]["l"] = 10
    return {"data": data, "layout": layout}


def top_conversations(rows: list[dict[str, Any]]) -> Chart:
    labels = [_short(f"#{row['conversation_id']} {row['title']}") for row in rows]
    table = Table(
        ["Conversation", "Title", "Requests", "Prompt tokens", "Cached tokens", "Cost (USD)"],
        [
            [
                row["conversation_id"],
                row["title"],
                row["requests"],
                row["prompt_tokens"],
                row["cached_tokens"],
                row["cost"],
            ]
            for row in rows
        ],
    )
    return Chart(figure=_cost_bars(rows, y=labels, color=PALETTE[0]), table=table, empty=not rows)


RANKING_SUMS = ("requests", "prompt_tokens", "cached_tokens", "completion_tokens", "cost")
RANKING_BAR_HEIGHT = 28  # px per bar, so one key is a bar, not a block
RANKING_MIN_HEIGHT = 170


def cost_ranking(rows: list[dict[str, Any]], *, name: str) -> Chart:
    """The costliest first, and "other" (key None) in grey at the bottom. `name`: what a row is
    ("API key", "End user"), the table's first column.

    Bars stand at positions named by tick labels: two labels that read alike once shortened
    (end users are the caller's text) stay two bars."""
    positions = [str(i) for i in range(len(rows))]
    colors = [PALETTE[-1] if row["key"] is None else PALETTE[0] for row in rows]
    figure = _cost_bars(rows, y=positions, color=colors)
    ticks = [_short(row["label"], 32) for row in rows]
    figure["layout"]["yaxis"].update(tickmode="array", tickvals=positions[::-1], ticktext=ticks[::-1])
    figure["layout"]["height"] = max(
        RANKING_MIN_HEIGHT, 70 + RANKING_BAR_HEIGHT * len(rows)
    )  # bars of one height
    table = Table(
        [name, "Requests", "Input tokens", "Cached tokens", "Output tokens", "Cost (USD)"],
        [[_ranked_name(row), *(row[column] for column in RANKING_SUMS)] for row in rows],
    )
    return Chart(figure=figure, table=table, empty=not rows)


def preset_versions(rows: list[dict[str, Any]]) -> Chart:
    """Cost per prompt version, the costliest on top, with each version's cached share and cost
    per request in the table (what changing a prompt did to the cache and the bill)."""
    positions = [str(i) for i in range(len(rows))]
    figure = _cost_bars(rows, y=positions, color=PALETTE[0])
    ticks = [_short(row["label"], 32) for row in rows]
    figure["layout"]["yaxis"].update(tickmode="array", tickvals=positions[::-1], ticktext=ticks[::-1])
    figure["layout"]["height"] = max(RANKING_MIN_HEIGHT, 70 + RANKING_BAR_HEIGHT * len(rows))
    places = money_places([row["cost_per_request"] for row in rows], smallest=True)
    table = Table(
        [
            "Preset version",
            "Requests",
            "Input tokens",
            "Cached share",
            "Output tokens",
            "Cost (USD)",
            "Per request",
        ],
        [
            [
                row["label"],
                row["requests"],
                row["prompt_tokens"],
                "not reported" if row["cached_share"] is None else f"{row['cached_share']:.0%}",
                row["completion_tokens"],
                row["cost"],
                None if row["cost_per_request"] is None else f"{row['cost_per_request']:.{places}f}",
            ]
            for row in rows
        ],
    )
    return Chart(figure=figure, table=table, empty=not rows)


def scores_by_version(rows: list[dict[str, Any]]) -> Chart:
    """Two panels on one axis of versions, the most scored on top: the mean 1-5 rating and the
    thumbs-up share, each bar hovered with how many scores it stands on (a version with no
    rating, or no thumb, has no bar in that panel)."""
    positions = [str(i) for i in range(len(rows))]
    ticks = [_short(row["label"], 32) for row in rows]

    def bars(value: str, count: str, *, axis: str, name: str, color: str, hover: str) -> dict[str, Any]:
        return {
            "type": "bar",
            "orientation": "h",
            "name": name,
            "x": [_num(row[value]) for row in reversed(rows)],
            "y": positions[::-1],
            "customdata": [row[count] for row in reversed(rows)],
            "marker": {"color": color},
            "xaxis": axis,
            "hovertemplate": f"{hover} · %{{customdata:,}} scored<extra></extra>",
        }

    data = [
        bars("rating_mean", "ratings", axis="x", name="Mean rating", color=PALETTE[0], hover="%{x:.2f} of 5"),
        bars("up_share", "thumbs", axis="x2", name="Thumbs up", color=PALETTE[2], hover="%{x:.0%} up"),
    ]
    layout = _layout(y_title="", hovermode="closest", showlegend=False)
    layout["xaxis"] = {
        "domain": [0, 0.44],
        "range": [0, 5],
        "dtick": 1,
        "title": {"text": "Mean rating (1-5)"},
        "gridcolor": "#f0f2f5",
    }
    layout["xaxis2"] = {
        "domain": [0.56, 1],
        "range": [0, 1],
        "tickformat": ".0%",
        "title": {"text": "Thumbs-up share"},
        "gridcolor": "#f0f2f5",
    }
    layout["yaxis"] = {
        "automargin": True,
        "type": "category",
        "tickmode": "array",
        "tickvals": positions[::-1],
        "ticktext": ticks[::-1],
    }
    layout["margin"]["l"] = 10
    layout["height"] = max(RANKING_MIN_HEIGHT, 90 + RANKING_BAR_HEIGHT * len(rows))
    table = Table(
        ["Preset version", "Scores", "Ratings", "Mean rating", "Thumbs", "Thumbs up", "Up share"],
        [
            [
                row["label"],
                row["scores"],
                row["ratings"],
                None if row["rating_mean"] is None else round(row["rating_mean"], 2),
                row["thumbs"],
                row["thumbs_up"],
                None if row["up_share"] is None else f"{row['up_share']:.0%}",
            ]
            for row in rows
        ],
    )
    return Chart(
        figure={"data": data, "layout": layout},
        table=table,
        empty=not rows,
        empty_text="No request of this period was scored.",
    )


def _ranked_name(row: dict[str, Any]) -> str:
    return f"{row['label']} ({row['detail']})" if row["detail"] else str(row["label"])


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def prompt_growth(sessions: list[dict[str, Any]]) -> Chart:
    data = []
    rows = []
    for i, session in enumerate(sessions):
        growth = prompt_growth_per_turn(session["turns"]) if len(session["turns"]) > 1 else None
        name = _short(f"#{session['conversation_id']} {session['title']}", 30)
        label = f"{name} ({growth:+,}/turn)" if growth is not None else name
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": label,
                "x": list(range(1, len(session["turns"]) + 1)),
                "y": session["turns"],
                "line": {"color": PALETTE[i % len(PALETTE)], "width": 2},
            }
        )
        rows.append([session["conversation_id"], session["title"], len(session["turns"]), growth])
    layout = _layout(y_title="Prompt tokens", x_title="Turn", hovermode="closest")
    return Chart(
        figure={"data": data, "layout": layout},
        table=Table(["Conversation", "Title", "Turns", "Growth (tokens per turn)"], rows),
        note="Each session's growth per turn is the median of its last five increases (a shorter prompt, "
        "after an edit, is left out): the growth its runway is foretold from.",
        empty=not sessions,
    )


def what_if(rows: list[dict[str, Any]], *, target_label: str) -> Chart:
    models = [row["model_id"] for row in rows]
    places = money_places([*(r["actual"] for r in rows), *(r["repriced"] for r in rows)])
    hover = _money_hover("y", places)
    data = [
        {
            "type": "bar",
            "name": "Actual",
            "x": models,
            "y": [_num(r["actual"]) for r in rows],
            "marker": {"color": PALETTE[0]},
            "hovertemplate": hover,
        },
        {
            "type": "bar",
            "name": target_label,
            "x": models,
            "y": [_num(r["repriced"]) for r in rows],
            "marker": {"color": PALETTE[1]},
            "hovertemplate": hover,
        },
    ]
    layout = _layout(y_title="USD", y_format=_money_axis(places), barmode="group", hovermode="closest")
    layout["xaxis"]["type"] = "category"
    actual = sum((r["actual"] for r in rows), Decimal(0))
    repriced = sum((r["repriced"] for r in rows), Decimal(0))
    shown = money_places([actual, repriced, repriced - actual], smallest=True)
    table = Table(
        [
            "Model",
            "Prompt tokens",
            "Cached tokens",
            "Completion tokens",
            "Actual (USD)",
            "Re-priced (USD)",
            "Difference (USD)",
        ],
        [
            [
                r["model_id"],
                r["prompt_tokens"],
                r["cached_tokens"],
                r["completion_tokens"],
                r["actual"],
                r["repriced"],
                r["difference"],
            ]
            for r in rows
        ],
    )
    return Chart(
        figure={"data": data, "layout": layout},
        table=table,
        note=f"Actual {money(actual, places=shown)}, re-priced {money(repriced, places=shown)}, "
        f"difference {money(repriced - actual, signed=True, places=shown)}.",
        empty=not rows,
        extra={"actual": actual, "repriced": repriced, "difference": repriced - actual},
    )


def cache_breaks(rows: list[dict[str, Any]], *, buckets: Sequence[dt.datetime]) -> Chart:
    """Breaks per bucket stacked by cause; the hover and the note say what they cost."""
    counts = _series(rows, buckets=buckets, key="cause", value="breaks")
    lost = _series(rows, buckets=buckets, key="cause", value="lost")
    x = [_iso(at) for at in buckets]
    order = [cause for cause in Cause if cause in counts]
    places = money_places([row["lost"] for row in rows], smallest=True)
    data = [
        {
            "type": "bar",
            "name": CAUSE_LABELS[cause],
            "x": x,
            "y": counts[cause],
            "customdata": [_num(value) for value in lost[cause]],
            "marker": {"color": PALETTE[index % len(PALETTE)]},
            "hovertemplate": f"%{{y}} breaks · %{{customdata:$,.{places}f}} lost",
        }
        for index, cause in enumerate(Cause)
        if cause in counts
    ]
    totals = {cause: sum(lost[cause], Decimal(0)) for cause in order}
    total = sum(totals.values(), Decimal(0))
    breaks = sum(row["breaks"] for row in rows)
    table = Table(
        ["Bucket (UTC)", *(CAUSE_LABELS[c] for c in order), "Lost (USD)"],
        [
            [x[i], *(counts[c][i] for c in order), sum((lost[c][i] for c in order), Decimal(0))]
            for i in range(len(x))
        ],
    )
    # Every cause the bars show, the costliest first, each with its breaks: a cause left out
    # of the words would be one the reader sees stacked and cannot account for.
    by_cost = sorted(order, key=lambda cause: -totals[cause])
    note = (
        f"{breaks:,} break{'' if breaks == 1 else 's'} lost {money(total, places=places)} of cache savings: "
        + ", ".join(
            f"{CAUSE_LABELS[c].lower()} {money(totals[c], places=places)} ({sum(counts[c]):,})"
            for c in by_cost
        )
        + ". A break is a request of a session (conversation, gateway session or affinity key) whose "
        "cached tokens fell short of the previous request's prompt."
        if rows
        else ""
    )
    return Chart(
        figure={"data": data, "layout": _layout(y_title="Breaks", barmode="stack")},
        table=table,
        note=note,
        empty=not rows,
        empty_text="No cache breaks in this period: every session's prefix came back cached as far "
        "as it was sent again.",
        extra={"total": total, "breaks": breaks},
    )


def lost_savings(rows: list[dict[str, Any]]) -> Chart:
    """Sessions by the cache savings they lost (rows {label, lost, requests}), the most on top."""
    bars = [{"cost": row["lost"], "requests": row["requests"]} for row in rows]
    positions = [str(i) for i in range(len(rows))]
    figure = _cost_bars(bars, y=positions, color=PALETTE[3])
    ticks = [_short(row["label"], 32) for row in rows]
    figure["layout"]["yaxis"].update(tickmode="array", tickvals=positions[::-1], ticktext=ticks[::-1])
    figure["layout"]["height"] = max(RANKING_MIN_HEIGHT, 70 + RANKING_BAR_HEIGHT * len(rows))
    figure["data"][0]["name"] = "Lost savings"
    table = Table(
        ["Session", "Requests", "Lost (USD)"], [[row["label"], row["requests"], row["lost"]] for row in rows]
    )
    return Chart(figure=figure, table=table, empty=not any(row["lost"] for row in rows))


# The redactor's types (`lib.redaction.ENTITIES`) and its failures, as the redactions chart names them.
REDACTION_LABELS = {
    "email": "E-mail addresses",
    "phone": "Phone numbers",
    "card": "Card numbers",
    "iban": "IBANs",
    "ip": "IP addresses",
    "secret": "Secrets",
    "redactor_error": "Redactor failures",
}


def redactions(rows: list[dict[str, Any]], *, buckets: Sequence[dt.datetime]) -> Chart:
    """Values replaced per bucket, stacked by type (rows {bucket, kind, values}); the note sums
    each type over the period, and says how many records the redactor failed on."""
    series = _series(rows, buckets=buckets, key="kind", value="values")
    x = [_iso(at) for at in buckets]
    order = [kind for kind in REDACTION_LABELS if kind in series]
    data = [
        {
            "type": "bar",
            "name": REDACTION_LABELS[kind],
            "x": x,
            "y": series[kind],
            "marker": {"color": STATUS_COLORS["upstream_error"] if kind == "redactor_error" else PALETTE[i]},
        }
        for i, kind in enumerate(order)
    ]
    totals = {kind: sum(series[kind]) for kind in order}
    replaced = sum(total for kind, total in totals.items() if kind != "redactor_error")
    failed = totals.get("redactor_error", 0)
    types = ", ".join(f"{REDACTION_LABELS[k].lower()} {totals[k]:,}" for k in order if k != "redactor_error")
    records = f"{failed:,} record{'' if failed == 1 else 's'}"
    ending = f"; the redactor failed on {records}, which kept metadata only." if failed else "."
    note = (
        f"{replaced:,} value{'' if replaced == 1 else 's'} replaced by placeholders: {types}{ending}"
        if rows
        else ""
    )
    table = Table(
        ["Bucket (UTC)", *(REDACTION_LABELS[kind] for kind in order)],
        [[x[i], *(series[kind][i] for kind in order)] for i in range(len(x))],
    )
    return Chart(
        figure={"data": data, "layout": _layout(y_title="Values replaced", barmode="stack")},
        table=table,
        note=note,
        empty=not rows,
        empty_text="Nothing was redacted in this period. Records kept redacted count the values they "
        "replaced; those kept in full replace none, and metadata-only ones keep no text to replace.",
        extra={"totals": totals},
    )
