"""List a team's cache breaks: where a session's prefix stopped being cached, and why (as kept
when each record was written; `rebuild_cache_breaks` fills them for records written before)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from playground.accounts.models import Team
from playground.usage.insights.cache_break_selectors import with_turn
from playground.usage.insights.cache_break_store import kept_team_breaks

DEFAULT_DAYS = 7
USD_PLACES = Decimal("1e-8")


class Command(BaseCommand):
    help = "One line per cache break of a team's sessions (conversations, gateway sessions, affinity keys)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", required=True, help="The team's slug or id")
        parser.add_argument(
            "--since",
            type=dt.date.fromisoformat,
            default=None,
            help=f"First day (YYYY-MM-DD, UTC); default: {DEFAULT_DAYS} days ago",
        )
        parser.add_argument("--format", choices=["text", "jsonl"], default="text")

    def handle(self, *args: Any, team: str, since: dt.date | None, format: str, **options: Any) -> None:
        found = Team.objects.filter(slug=team).first() or (
            Team.objects.filter(pk=int(team)).first() if team.isdigit() else None
        )
        if found is None:
            raise CommandError(f"No team with the slug or id {team!r}.")
        start = (
            dt.datetime.combine(since, dt.time(), tzinfo=dt.UTC)
            if since is not None
            else timezone.now() - dt.timedelta(days=DEFAULT_DAYS)
        )
        for each in kept_team_breaks(team_id=found.pk, since=start):
            cache_break = with_turn(each, team_id=found.pk)
            line = {
                "record_id": cache_break.record_id,
                "session": cache_break.session,
                "turn": cache_break.turn,
                "cause": str(cache_break.cause),
                "cached_tokens": cache_break.cached_tokens,
                "expected_cached_tokens": cache_break.expected_cached_tokens,
                "lost_usd": float(cache_break.lost_usd.quantize(USD_PLACES)),
            }
            if format == "jsonl":
                self.stdout.write(json.dumps(line))
            else:
                self.stdout.write(
                    f"{cache_break.created_at:%Y-%m-%d %H:%M:%S}  record {line['record_id']}  "
                    f"{line['session']} turn {line['turn']}: {line['cause']} ({cache_break.detail}); "
                    f"{line['cached_tokens']} of {line['expected_cached_tokens']} cached, "
                    f"${cache_break.lost_usd.quantize(USD_PLACES):f} lost"  # decimals, never 4.029e-05
                )
