"""Recompute the usage rollups from the raw records (after an upgrade, or to audit them)."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from playground.usage.rollups import rollups_rebuild
from playground.usage.session_rollups import session_rollups_rebuild


class Command(BaseCommand):
    help = "Rebuild the hour, day, conversation-day and session usage rollups from the usage records."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", type=int, default=None, help="Only this team id (default: every team)")

    def handle(self, *args: Any, team: int | None = None, **options: Any) -> None:
        started = time.perf_counter()
        rollups_rebuild(team_id=team)
        session_rollups_rebuild(team_id=team)
        scope = f"team {team}" if team is not None else "every team"
        self.stdout.write(f"Rebuilt the usage rollups of {scope} in {time.perf_counter() - started:.1f} s.")
