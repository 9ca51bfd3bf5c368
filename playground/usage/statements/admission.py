"""Admission's read: a team, its budget's limit and rule for unpriced requests, and a member's limit."""

from __future__ import annotations

import functools
from decimal import Decimal

from django.db import connection

from playground.accounts.models import Membership, Team
from playground.usage.models import TeamBudget
from playground.usage.statements import raw_sql


def team_with_limits(
    *, team_id: int, user_id: int | None
) -> tuple[Team, Decimal | None, bool, Decimal | None]:
    """The team, its budget's limit and rule for unpriced requests, and the member's limit, read
    in one statement at every admission: a limit changed a moment ago applies to the next request.
    Every gateway request runs it (issue 24)."""
    with connection.cursor() as cursor:
        cursor.execute(_team_with_limits_sql(connection.vendor), [user_id, team_id])
        row = cursor.fetchone()
    if row is None:
        raise Team.DoesNotExist(f"No team {team_id}")
    teams = raw_sql.column_count(Team)
    team_limit, allow_unpriced, member_limit = row[teams:]
    return (
        raw_sql.from_row(Team, row[:teams]),
        raw_sql.field_value(TeamBudget, "monthly_limit_usd", team_limit),
        bool(raw_sql.field_value(TeamBudget, "allow_unpriced", allow_unpriced)),
        raw_sql.field_value(Membership, "monthly_budget_usd", member_limit),
    )


@functools.cache
def _team_with_limits_sql(vendor: str) -> str:
    """The statement, made once per database vendor. No member (user None) joins no membership."""
    team_id = raw_sql.column(Team, "id", alias="t")
    return (
        f"SELECT {raw_sql.select_list(Team, 't')}, "  # noqa: S608
        f"{raw_sql.columns(TeamBudget, 'monthly_limit_usd', 'allow_unpriced', alias='b')}, "
        f"{raw_sql.column(Membership, 'monthly_budget_usd', alias='m')} "
        f"FROM {raw_sql.table(Team)} t "
        f"LEFT JOIN {raw_sql.table(TeamBudget)} b ON b.{raw_sql.column(TeamBudget, 'team')} = {team_id} "
        f"LEFT JOIN {raw_sql.table(Membership)} m ON m.{raw_sql.column(Membership, 'team')} = {team_id} "
        f"AND m.{raw_sql.column(Membership, 'user')} = %s "
        f"WHERE {team_id} = %s"
    )
