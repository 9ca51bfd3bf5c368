"""Recompute the kept cache breaks from the records: for records written before breaks were kept
at write time (issue 40), or to audit them. Day by day, each day its own transaction, so a
stopped run loses at most the day it was on: rerun with `--since` that day."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from playground.accounts.models import Team
from playground.usage.insights.cache_break_store import cache_breaks_rebuild, days_to_rebuild


class Command(BaseCommand):
    help = "Recompute the cache breaks (and their hourly sums by cause) of past usage records, day by day."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", type=int, default=None, help="Only this team id (default: every team)")
        parser.add_argument(
            "--since",
            type=dt.date.fromisoformat,
            default=None,
            help="First UTC day (YYYY-MM-DD) to recompute, to resume a stopped run; default: each team's",
        )

    def handle(self, *args: Any, team: int | None, since: dt.date | None, **options: Any) -> None:
        started = time.perf_counter()
        teams = [team] if team is not None else list(Team.objects.order_by("pk").values_list("pk", flat=True))
        total = 0
        for team_id in teams:
            days = days_to_rebuild(team_id=team_id, since=since)
            found = 0
            for day in days:
                try:
                    found += cache_breaks_rebuild(team_id=team_id, day=day)
                except KeyboardInterrupt:
                    raise CommandError(
                        f"Stopped: days before {day} are done; resume with --team {team_id} --since {day}."
                    ) from None
            total += found
            if days:
                self.stdout.write(f"team {team_id}: {found} breaks over {len(days)} days, up to {days[-1]}")
        self.stdout.write(f"Rebuilt {total} cache breaks in {time.perf_counter() - started:.1f} s.")
