"""The rollup rows a dashboard filter reads: which table, its rows and buckets, the span the time charts draw.

Every function takes `Filters`, whose team the caller has already checked is the acting
user's (see `filters.filters_from_query`). Periods of up to seven days read the hourly
rollup, longer ones the daily rollup; a bucket is counted when it starts inside the period.
Money leaves here as Decimal USD; re-pricing goes through `usage.pricing.cost_for`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Max, Min, Q, QuerySet, Sum

from playground.analytics.filters import HOURLY_UP_TO, Filters, Period
from playground.catalog.models import PriceCard
from playground.presets.selectors import team_version_choices
from playground.providers.models import ProviderConnection
from playground.providers.usage_normalize import NormalizedUsage
from playground.routing.selectors import routing_rule_names
from playground.usage.models import (
    COST_SCALE,
    ApiKey,
    CacheState,
    UsageDaily,
    UsageEndUserDaily,
    UsageEndUserHourly,
    UsageHourly,
    UsageKeyDaily,
    UsageKeyHourly,
    UsagePeopleDaily,
    UsagePeopleHourly,
    UsageTeamDaily,
    UsageTeamHourly,
)
from playground.usage.pricing import cost_for

HOUR = dt.timedelta(hours=1)
DAY = dt.timedelta(days=1)
ZOOM_MIN_BUCKETS = 12
KNOWN_CACHE = ~Q(cache_state=CacheState.UNKNOWN)


def usd(e10: int | None) -> Decimal:
    return Decimal(e10 or 0) / COST_SCALE


def bucket_floor(at: dt.datetime, *, hourly: bool) -> dt.datetime:
    at = at.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)
    return at if hourly else at.replace(hour=0)


RollupModel = (
    type[UsageHourly]
    | type[UsageDaily]
    | type[UsageTeamHourly]
    | type[UsageTeamDaily]
    | type[UsagePeopleHourly]
    | type[UsagePeopleDaily]
)


def rollup_model(filters: Filters, *, by_people: bool = False) -> RollupModel:
    """The smallest rollup that holds what the filters and the grouping need, hourly or daily.

    People tables (users and connections; costs and tokens only) when grouping by user or
    connection with no other dimension filtered; team-level ones when neither users nor
    connections are involved; the full key otherwise.
    """
    hourly = filters.period.hourly
    other_dimension = filters.model_id or filters.path or filters.status or filters.affinity
    if by_people and not other_dimension:
        return UsagePeopleHourly if hourly else UsagePeopleDaily
    if by_people or filters.user_id or filters.connection_id:
        return UsageHourly if hourly else UsageDaily
    return UsageTeamHourly if hourly else UsageTeamDaily


def _period_rows(model: type[Any], filters: Filters) -> QuerySet[Any]:
    """`model`'s rows of the filters' team whose bucket starts inside the period."""
    period = filters.period
    rows: QuerySet[Any] = model.objects.filter(
        team=filters.team, bucket__gte=bucket_floor(period.start, hourly=period.hourly), bucket__lt=period.end
    )
    return rows.order_by()


def rollup_rows(filters: Filters, *, by_people: bool = False) -> QuerySet[Any]:
    """The rollup rows of the filters' team, period and dimensions (hourly or daily).

    `by_people`: the caller groups by user or connection and reads only costs and tokens.
    These tables hold no API key or end user: a caller asks `attribution_rows` when the
    filters name one (`Filters.by_attribution`).
    """
    if filters.by_attribution:
        raise ValueError("The rollups hold no API key or end user: read attribution_rows.")
    rows = _period_rows(rollup_model(filters, by_people=by_people), filters).filter(
        **filters.column_lookups()
    )
    if filters.affinity:
        rows = rows.filter(affinity=filters.affinity == "on")
    return rows


def attribution_rows(filters: Filters, *, by_end_user: bool = False) -> QuerySet[Any]:
    """The gateway's rollup rows by API key (or, with `by_end_user` or an end user chosen, by end
    user) of the filters' team, period, key, end user and path; only for filters that choose
    nothing else (`Filters.beyond_attribution`). Counts, tokens and costs: no model, status or
    histogram."""
    if filters.beyond_attribution():
        raise ValueError(
            "The rollups by key and end user hold no model, user, connection, status or affinity."
        )
    hourly = filters.period.hourly
    if by_end_user or filters.end_user:
        model: type[Any] = UsageEndUserHourly if hourly else UsageEndUserDaily
    else:
        model = UsageKeyHourly if hourly else UsageKeyDaily
    path = {"path": filters.path} if filters.path else {}
    return _period_rows(model, filters).filter(**filters.attribution_lookups(), **path)


def filter_choices(filters: Filters) -> dict[str, list[Any]]:
    """What the filter pickers offer: the team's models (those it used), members, connections, API
    keys, and the rules its routing policies have named."""
    team = filters.team
    return {
        "model_options": list(
            UsageTeamDaily.objects.filter(team=team)
            .values_list("model_id", flat=True)
            .distinct()
            .order_by("model_id")
        ),
        "user_options": list(
            User.objects.filter(memberships__team=team).order_by("username").values_list("pk", "username")
        ),
        "connection_options": list(
            ProviderConnection.objects.filter(team=team).order_by("name").values_list("pk", "name")
        ),
        "preset_version_options": team_version_choices(team_id=team.pk),
        "route_options": routing_rule_names(team.pk),
        "key_options": [
            (pk, f"{name} (revoked)" if revoked_at else name)
            for pk, name, revoked_at in ApiKey.objects.filter(team=team)
            .order_by("name")
            .values_list("pk", "name", "revoked_at")
        ],
    }


def buckets(filters: Filters) -> list[dt.datetime]:
    """Every bucket start of the period, so a chart shows quiet hours as zero, not as gaps."""
    step = dt.timedelta(hours=1) if filters.period.hourly else dt.timedelta(days=1)
    at = bucket_floor(filters.period.start, hourly=filters.period.hourly)
    out = []
    while at < filters.period.end:
        out.append(at)
        at += step
    return out


def column_sums(columns: tuple[str, ...]) -> dict[str, Sum]:
    return {column: Sum(column) for column in columns}


def at_input_price(card: PriceCard, cached_tokens: int) -> Decimal:
    """What cached tokens would have cost at the card's fresh input price."""
    return cost_for(usage=NormalizedUsage(prompt_tokens=cached_tokens, completion_tokens=0), card=card).input


def _active_buckets(filters: Filters) -> tuple[dt.datetime, dt.datetime] | None:
    """The first and last bucket with a request under the filters (the period's grain)."""
    span = rollup_rows(filters).aggregate(first=Min("bucket"), last=Max("bucket"))
    return None if span["first"] is None else (span["first"], span["last"])


def chart_period(filters: Filters) -> Period:
    """The part of the period the time charts draw, so that a short burst is readable.

    From the first to the last bucket with a request, widened to at least
    `ZOOM_MIN_BUCKETS` buckets inside the period, and hourly when the requests span seven days
    or less (a 90-day period whose requests fall in two days is drawn as 48 hours, not two
    bars). When that span is half the period or more, the whole period is drawn as chosen.
    Every request of the period lies inside the span, so no chart's total changes. Under a key or
    end-user filter (which the rollups read here cannot answer; only a chart that reads the records
    draws then) the whole period is drawn.
    """
    period = filters.period
    if filters.by_attribution:
        return period
    active = _active_buckets(filters)
    if active is None:
        return period
    first, last = active
    hourly = period.hourly
    if not hourly and last - first < HOURLY_UP_TO:
        days = Period(start=first, end=last + DAY, preset=period.preset, hourly=True)
        first, last = _active_buckets(replace(filters, period=days)) or active
        hourly = True
    step = HOUR if hourly else DAY
    lowest = bucket_floor(period.start, hourly=hourly)
    highest = bucket_floor(period.end - dt.timedelta(microseconds=1), hourly=hourly)
    missing = ZOOM_MIN_BUCKETS - ((last - first) // step + 1)
    if missing > 0:  # widen evenly, then move what falls outside the period to the other side
        first, last = first - step * (missing // 2), last + step * (missing - missing // 2)
        if last > highest:
            first, last = first - (last - highest), highest
        if first < lowest:
            first, last = lowest, min(highest, last + (lowest - first))
    window = Period(start=first, end=last + step, preset=period.preset, hourly=hourly)
    if (window.end - window.start) * 2 >= period.end - period.start:
        return period
    return window
