"""`manage.py verify_routing_chain --team TEAM`: walk the team's chain of sealed routing decisions
(`usage.routing_seals`), check its links and every routed record still there against its seal,
and say what retention and erasure removed; exit 1 on any change, deletion or insertion."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from playground.accounts.commands import team_named
from playground.usage.routing_seals import routing_chain_verify


class Command(BaseCommand):
    help = (
        "Check that a team's routing decisions are as they were sealed (audit_verify checks its audit log)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", required=True, help="The team's id or name")

    def handle(self, *args: Any, **options: Any) -> None:
        team = team_named(str(options["team"]))
        report = routing_chain_verify(team_id=team.pk)
        until = f"{report.sealed_until:%Y-%m-%d %H:%M:%S} UTC" if report.sealed_until else "never"
        line = f"{team.name} (#{team.pk}): routing decisions {report}; sealed up to {until}"
        if report.intact:
            self.stdout.write(line)
            return
        self.stderr.write(line)
        for problem in report.problems:
            self.stderr.write(f"  {problem}")
        raise SystemExit(1)
