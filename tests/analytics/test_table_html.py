"""A chart's table body made in Python is the markup the template's loops made (issue 40)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from django.template import Context, Template

from playground.analytics.charts import Table
from playground.analytics.table_html import table_body

# The template's loops before the body was made in Python, as they were in analytics/chart.html.
LOOPS = Template(
    "{% with figures=table.figure_columns %}"
    '{% for row in table.rows %}<tr>{% for cell in row %}<td{% if forloop.counter0 in figures %} class="num"'
    "{% endif %}>{% if cell is None %}\N{EN DASH}{% else %}{{ cell }}{% endif %}</td>{% endfor %}</tr>"
    "{% empty %}"
    '<tr><td colspan="{{ table.columns|length }}" class="muted">No rows.</td></tr>{% endfor %}'
    "{% endwith %}"
)


def test_the_body_is_the_markup_of_the_templates_loops() -> None:
    at = dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.UTC)
    table = Table(
        columns=["hour", "member", "cost", "requests", "share"],
        rows=[
            [at, "ana <admin> & co", Decimal("0.0012"), 3, 0.25],
            [at + dt.timedelta(hours=1), None, Decimal("12.5"), None, None],
            ["2026-11-20 11:00", "bo", Decimal(0), 0, 1.0],
            [at, "bo", Decimal("0.00"), 0.0, 0],  # equal values, each shown as its own type shows it
        ],
    )
    for shown in (table, Table(columns=["a", "b"], rows=[])):
        made = str(table_body(shown))
        assert made == LOOPS.render(Context({"table": shown}))
    assert "&lt;admin&gt; &amp; co" in str(table_body(table)) and '<td class="num">3</td>' in str(
        table_body(table)
    )
