"""`manage.py erase_end_user --team TEAM --end-user ID [--dry-run]`: one end user's bodies and
attribution erased from a team (issue 37), through the same service as the Data page's button;
it prints what held the id, by kind (0 everywhere on a second run)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from playground.accounts.commands import team_named
from playground.teams.services.erasure import end_user_erase_by_operator


class Command(BaseCommand):
    help = (
        "Erase one end user of a team: the text of its requests' records, its id (replaced by a "
        "tombstone, costs kept), and the id wherever the team's chats, batches and replay store hold it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", required=True, help="The team's id or name")
        parser.add_argument(
            "--end-user", required=True, help="The id its requests sent (x-playground-user or `user`)"
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what would be erased; change nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        team = team_named(str(options["team"]))
        dry_run = bool(options["dry_run"])
        try:
            counts = end_user_erase_by_operator(team=team, end_user=str(options["end_user"]), dry_run=dry_run)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        verb = "would erase" if dry_run else "erased"
        found = ", ".join(f"{name.replace('_', ' ')} {n}" for name, n in counts.items())
        self.stdout.write(f"{team.name} (#{team.pk}): {verb} {sum(counts.values())} ({found})")
