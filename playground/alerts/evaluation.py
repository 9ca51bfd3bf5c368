"""Looking at each team's usage for what its alert rules name, once a minute (Celery beat), and
raising each occurrence once (`events.alert_raise` keys it). Only teams with a destination are
looked at, each through its own indexed rows: the rollups for spend and cache share, the records
of the last few minutes for a failing connection, the budget alerts already recorded."""

from __future__ import annotations

import datetime as dt
import statistics
from decimal import Decimal

from django.db.models import Count, Sum

from playground.accounts.models import Team
from playground.alerts.events import alert_raise
from playground.alerts.models import AlertDestination, AlertKind, AlertRules
from playground.providers.models import ProviderConnection
from playground.usage.models import BudgetAlert, UsageRecord, UsageStatus, UsageTeamDaily, UsageTeamHourly
from playground.usage.money import money

FAILED = (UsageStatus.UPSTREAM_ERROR, UsageStatus.TIMEOUT)
BUDGET_LOOKBACK = dt.timedelta(days=2)  # a threshold recorded while no destination existed is not told late
TRAILING_DAYS = 7
MIN_HOUR_PROMPT_TOKENS = 10_000  # below this an hour's cached share says little
E10 = Decimal(10) ** 10


def alerts_evaluate(*, now: dt.datetime) -> int:
    """Evaluate every team that has an enabled destination; the number of events raised."""
    raised = 0
    team_ids = AlertDestination.objects.filter(enabled=True).values_list("team_id", flat=True).distinct()
    for team in Team.objects.filter(pk__in=list(team_ids)):
        rules = AlertRules.objects.filter(team=team).first() or AlertRules(team=team)
        raised += sum(
            check(team, rules, now) for check in (_budget, _connections, _spend_anomaly, _cache_drop)
        )
    return raised


def _budget(team: Team, rules: AlertRules, now: dt.datetime) -> int:
    raised = 0
    for alert in BudgetAlert.objects.filter(team=team, created_at__gte=now - BUDGET_LOOKBACK):
        event = alert_raise(
            team_id=team.pk,
            kind=AlertKind.BUDGET,
            key=f"{alert.month:%Y-%m}:{alert.threshold}",
            title=f"{team.name} has used {alert.threshold}% of its monthly budget",
            summary=f"{team.name} crossed {alert.threshold}% of its budget for {alert.month:%B %Y}.",
            details={"month": f"{alert.month:%Y-%m}", "threshold": alert.threshold},
        )
        raised += event is not None
    return raised


def _connections(team: Team, rules: AlertRules, now: dt.datetime) -> int:
    window = dt.timedelta(minutes=rules.connection_minutes)
    failing = (
        UsageRecord.objects.filter(team=team, created_at__gte=now - window, status__in=FAILED)
        .values("connection_id")
        .annotate(failures=Count("id"))
        .filter(failures__gte=rules.connection_errors)
    )
    names = dict(ProviderConnection.objects.filter(team=team).values_list("pk", "name"))
    bucket = int(now.timestamp() // window.total_seconds())  # once per window, not every minute
    raised = 0
    for row in failing:
        name = names.get(row["connection_id"], "a deleted connection")
        event = alert_raise(
            team_id=team.pk,
            kind=AlertKind.CONNECTION,
            key=f"{row['connection_id']}:{bucket}",
            title=f"Connection {name} is failing",
            summary=(
                f"{row['failures']} requests of {team.name} through {name} failed (upstream error or "
                f"timeout) in the last {rules.connection_minutes} minutes."
            ),
            details={"connection": row["connection_id"], "failures": row["failures"]},
        )
        raised += event is not None
    return raised


def _spend_anomaly(team: Team, rules: AlertRules, now: dt.datetime) -> int:
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    rows = (
        UsageTeamDaily.objects.filter(team=team, bucket__gte=today - dt.timedelta(days=TRAILING_DAYS))
        .values("bucket")
        .annotate(cost=Sum("total_cost_e10"))
    )
    by_day = {row["bucket"]: Decimal(row["cost"] or 0) / E10 for row in rows}
    trailing = [by_day.get(today - dt.timedelta(days=n), Decimal(0)) for n in range(1, TRAILING_DAYS + 1)]
    median = Decimal(statistics.median(trailing))
    spent = by_day.get(today, Decimal(0))
    if median <= 0 or spent <= rules.spend_factor * median:
        return 0
    event = alert_raise(
        team_id=team.pk,
        kind=AlertKind.SPEND,
        key=f"{today:%Y-%m-%d}",
        title=f"{team.name} is spending {spent / median:.1f} times its usual day",
        summary=(
            f"{team.name} has spent {money(spent)} today (UTC), above {rules.spend_factor} times the median "
            f"of its last {TRAILING_DAYS} days ({money(median)})."
        ),
        details={"spent_usd": str(spent), "median_usd": str(median), "factor": str(rules.spend_factor)},
    )
    return int(event is not None)


def _cache_drop(team: Team, rules: AlertRules, now: dt.datetime) -> int:
    hour = now.replace(minute=0, second=0, microsecond=0) - dt.timedelta(hours=1)  # the last whole hour
    last = UsageTeamHourly.objects.filter(team=team, bucket=hour).aggregate(
        prompt=Sum("prompt_tokens"), cached=Sum("cached_tokens")
    )
    before = UsageTeamHourly.objects.filter(
        team=team, bucket__gte=hour - dt.timedelta(days=TRAILING_DAYS), bucket__lt=hour
    ).aggregate(prompt=Sum("prompt_tokens"), cached=Sum("cached_tokens"))
    if (last["prompt"] or 0) < MIN_HOUR_PROMPT_TOKENS or not before["prompt"]:
        return 0
    share = 100 * (last["cached"] or 0) / last["prompt"]
    usual = 100 * (before["cached"] or 0) / before["prompt"]
    if usual - share < rules.cache_drop_points:
        return 0
    event = alert_raise(
        team_id=team.pk,
        kind=AlertKind.CACHE,
        key=f"{hour:%Y-%m-%dT%H}",
        title=f"{team.name}'s cache hit ratio dropped to {share:.0f}%",
        summary=(
            f"In the hour from {hour:%H:%M} UTC, {share:.0f}% of {team.name}'s prompt tokens were cached, "
            f"against {usual:.0f}% over the {TRAILING_DAYS} days before: cached prefixes are being lost "
            "(see Usage → Cache breaks by cause)."
        ),
        details={"hour": hour.isoformat(), "share": round(share, 1), "usual": round(usual, 1)},
    )
    return int(event is not None)
