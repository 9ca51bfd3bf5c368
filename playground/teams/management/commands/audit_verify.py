"""`manage.py audit_verify --team TEAM`: walk the team's chain of decision records (audit events and
routing policy versions) and say "intact, N entries" or where it first breaks; exit 1 if broken."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from playground.accounts.commands import team_named
from playground.teams.selectors import decision_chain_status


class Command(BaseCommand):
    help = "Check that a team's audit events and routing policy versions are as they were written."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", required=True, help="The team's id or name")

    def handle(self, *args: Any, **options: Any) -> None:
        team = team_named(str(options["team"]))
        status = decision_chain_status(team=team)
        if status.intact:
            self.stdout.write(f"{team.name} (#{team.pk}): {status}")
            return
        self.stderr.write(f"{team.name} (#{team.pk}): {status}")
        for problem in status.breaks[1:]:
            self.stderr.write(f"  also {problem}")
        raise SystemExit(1)
