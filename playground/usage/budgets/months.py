"""Budget months: they start at midnight on the 1st in the team's own time zone."""

from __future__ import annotations

import datetime as dt
import zoneinfo

from django.utils import timezone

from playground.accounts.models import Team


def team_zone(team: Team) -> zoneinfo.ZoneInfo:
    try:
        return zoneinfo.ZoneInfo(team.time_zone or "UTC")
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return zoneinfo.ZoneInfo("UTC")


def budget_month(team: Team, *, now: dt.datetime | None = None) -> dt.date:
    """The first day of the team's current month, in its own time zone."""
    local = (now or timezone.now()).astimezone(team_zone(team))
    return local.date().replace(day=1)


def month_bounds(team: Team, month: dt.date) -> tuple[dt.datetime, dt.datetime]:
    """[start, end) of `month` as aware datetimes in the team's zone."""
    zone = team_zone(team)
    start = dt.datetime.combine(month, dt.time.min, tzinfo=zone)
    following = (month.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
    return start, dt.datetime.combine(following, dt.time.min, tzinfo=zone)
