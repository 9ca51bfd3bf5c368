"""What the usage floor adds to the Prometheus metrics (`lib.metrics`): every usage record counted
once it commits, and the teams' budgets read at scrape time.

`records_count_after_commit` is called by the one record writer (`usage.records`) and by nothing
else: whatever sent a request (chat, compare, batch item, gateway), its record is what is counted,
so the metrics and the Usage pages cannot disagree on what happened. A record rolled back (a
settled group written again one by one) counts nothing; its replacement counts once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from functools import partial

from django.db import transaction
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from playground.accounts.models import Team
from playground.lib.metrics import COST, LATENCY, REQUESTS, ROUTING_OUTCOMES, TOKENS, TTFT
from playground.usage.budgets.status import team_budgets_used
from playground.usage.models import UsageRecord, UsageStatus

# A gateway client may name any model, and a record is written even when the upstream refuses it:
# such a model is counted as "other" unless it is priced (catalogued) or was answered. This process
# also labels at most MODEL_LABELS_MAX distinct models, the rest as "other", whatever happens.
OTHER_MODEL = "other"
MODEL_LABELS_MAX = 500
NO_CONNECTION = "none"  # the record's connection was deleted

_models_labelled: set[str] = set()
_models_lock = threading.Lock()


def records_count_after_commit(records: Sequence[UsageRecord]) -> None:
    """Count `records` in the metrics once the current transaction commits (at once outside one).
    A failure to count is logged by Django and never reaches the caller (`robust`)."""
    if records:
        transaction.on_commit(partial(records_count, list(records)), robust=True)


def records_count(records: list[UsageRecord]) -> None:
    """Count `records` in the metrics now (`records_count_after_commit` waits for their commit)."""
    for record in records:
        path, team, model = record.path, str(record.team_id), model_label(record)
        connection = str(record.connection_id) if record.connection_id is not None else NO_CONNECTION
        REQUESTS.labels(path, record.status, team, connection, model).inc()
        for kind, tokens in (
            ("input", record.prompt_tokens),
            ("cached", record.cached_tokens),
            ("cache_write", record.cache_write_tokens),
            ("output", record.completion_tokens),
        ):
            if tokens:
                TOKENS.labels(kind, path, team, connection, model).inc(tokens)
        if record.price_card_id is not None and record.total_cost:
            COST.labels(path, team, connection, model).inc(float(record.total_cost))
        if record.latency_ms is not None:
            LATENCY.labels(path, connection, model).observe(record.latency_ms / 1000)
        if record.ttft_ms is not None:
            TTFT.labels(path, connection, model).observe(record.ttft_ms / 1000)
        if record.route_fell_back:
            ROUTING_OUTCOMES.labels("fell_back", team).inc()
        if record.route_downgraded:
            ROUTING_OUTCOMES.labels("downgraded", team).inc()


def model_label(record: UsageRecord) -> str:
    """The record's model id as a label value, or `OTHER_MODEL` (see above)."""
    model = record.model_id
    if model in _models_labelled:
        return model
    if record.price_card_id is None and record.status != UsageStatus.OK:
        return OTHER_MODEL
    with _models_lock:
        if len(_models_labelled) >= MODEL_LABELS_MAX:
            return OTHER_MODEL
        _models_labelled.add(model)
    return model


class BudgetCollector(Collector):
    """At scrape time: each team with a monthly budget, its limit, what it spent this month and the
    share used; and each team's slug (`playground_team_info`), for dashboards that name teams."""

    def collect(self) -> Iterable[Metric]:
        used = GaugeMetricFamily(
            "playground_budget_used_ratio",
            "Share of the team's monthly budget spent this month (1 = all of it).",
            labels=["team"],
        )
        limit = GaugeMetricFamily(
            "playground_budget_limit_usd", "The team's monthly budget in US dollars.", labels=["team"]
        )
        spent = GaugeMetricFamily(
            "playground_budget_spent_usd", "What the team spent this month in US dollars.", labels=["team"]
        )
        for budget in team_budgets_used():
            team = str(budget.team_id)
            limit.add_metric([team], float(budget.limit))
            spent.add_metric([team], float(budget.spent))
            used.add_metric([team], float(budget.spent / budget.limit) if budget.limit else 0.0)
        info = GaugeMetricFamily(
            "playground_team_info", "Each team's slug, by its id (always 1).", labels=["team", "slug"]
        )
        for team_id, slug in Team.objects.values_list("id", "slug"):
            info.add_metric([str(team_id), slug], 1)
        return [used, limit, spent, info]
