"""Recompute the rollups by session from the raw records (once after the upgrade that adds them)."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from playground.usage.session_rollups import session_rollups_rebuild


class Command(BaseCommand):
    help = "Rebuild the rollups by session (the dashboard's runway and hit ratio) from the usage records."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", type=int, default=None, help="Only this team id (default: every team)")

    def handle(self, *args: Any, team: int | None = None, **options: Any) -> None:
        started = time.perf_counter()
        session_rollups_rebuild(team_id=team)
        scope = f"team {team}" if team is not None else "every team"
        self.stdout.write(f"Rebuilt the session rollups of {scope} in {time.perf_counter() - started:.1f} s.")
