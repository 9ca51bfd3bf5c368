"""`manage.py team_settings --team TEAM [--store {full,redacted,metadata}] [--upstream-redaction
{on,off}]`: a team's settings on the server's command line, through the same services as the team
pages; without an option it prints them."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from playground.accounts.commands import team_named
from playground.accounts.models import StoreMode, Team
from playground.teams.services.retention import team_retention, team_retention_set_by_operator
from playground.teams.services.storage import (
    team_store_mode_set_by_operator,
    team_upstream_redaction_set_by_operator,
)

ON_OFF = {"on": True, "off": False}


class Command(BaseCommand):
    help = (
        "Show or change a team's settings: --store sets what its request records keep of their text, "
        "--upstream-redaction whether its requests go to the model redacted."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", required=True, help="The team's id or name")
        parser.add_argument(
            "--store",
            choices=StoreMode.values,
            help="What the records of the team's requests keep of their text (gateway keys that name "
            "their own mode keep theirs): the full text, redacted text, or metadata only",
        )
        parser.add_argument(
            "--upstream-redaction",
            choices=list(ON_OFF),
            help="on: the team's requests go to the model with placeholders instead of sensitive values",
        )
        for name, what in (
            ("body", "the text of its request records is removed"),
            ("record", "they are deleted"),
        ):
            parser.add_argument(
                f"--{name}-retention-days",
                type=int,
                metavar="DAYS",
                help=f"After how many days {what} by the daily retention run; 0: kept for good",
            )

    def handle(self, *args: Any, **options: Any) -> None:
        team = team_named(str(options["team"]))
        if options["store"] is not None:
            try:
                team = team_store_mode_set_by_operator(team=team, mode=str(options["store"]))
            except ValidationError as exc:
                raise CommandError(" ".join(exc.messages)) from None
        if options["upstream_redaction"] is not None:
            on = ON_OFF[options["upstream_redaction"]]
            team = team_upstream_redaction_set_by_operator(team=team, on=on)
        upstream = "on" if team.upstream_redaction else "off"
        self.stdout.write(f"{team.name} (#{team.pk}): store {team.store_mode}, upstream redaction {upstream}")
        retention = self._retention(team, options["body_retention_days"], options["record_retention_days"])
        if retention:
            self.stdout.write(retention)

    def _retention(self, team: Team, body_days: int | None, record_days: int | None) -> str:
        """The retention set (an option not given keeps its value, 0 keeps for good) and said;
        nothing for a team that keeps everything and was given no retention option."""
        state = team_retention(team)
        asked = body_days is not None or record_days is not None
        if not asked and state.body_days is None and state.record_days is None:
            return ""
        if asked:
            try:
                state = team_retention_set_by_operator(
                    team=team,
                    body_days=(body_days or None) if body_days is not None else state.body_days,
                    record_days=(record_days or None) if record_days is not None else state.record_days,
                )
            except ValidationError as exc:
                raise CommandError(" ".join(exc.messages)) from None
        texts = f"{state.body_days} days" if state.body_days else "kept"
        records = f"{state.record_days} days" if state.record_days else "kept"
        return f"retention: texts {texts}, records {records}"
