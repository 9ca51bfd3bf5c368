"""The sessions of the period closest to their model's context window (`usage.insights.runway`).

Bounded: the `CANDIDATES` sessions with the largest prompts among the filtered records of the
period (from the session rollups when only the period is chosen: `session_rankings`), then the
latest records of each inside the period (`runway_selectors.LATEST`, in one read through the
sessions' indexed columns), ranked by the turns they have left.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Max

from playground.analytics.filters import Filters
from playground.analytics.selectors.request_log import log_records
from playground.analytics.selectors.session_rankings import plain, top_sessions
from playground.usage.insights.cache_break_selectors import ANSWERED
from playground.usage.insights.runway import Runway
from playground.usage.insights.runway_selectors import sessions_runways
from playground.usage.insights.sessions import session_key_expression

CANDIDATES = 50
SHOWN = 10


@dataclass(frozen=True)
class SessionRunway:
    session: str  # a `usage.insights.sessions` key
    model_id: str
    turns_in_period: int
    runway: Runway


def sessions_near_limit(filters: Filters) -> list[SessionRunway]:
    """The `SHOWN` sessions with the fewest turns left (those whose prompt grows), fewest first."""
    turns = _candidates(filters)
    runways = sessions_runways(
        team_id=filters.team.pk, sessions=list(turns), since=filters.period.start, until=filters.period.end
    )
    found = [
        SessionRunway(session, runway.model_id, turns[session], runway)
        for session, runway in runways.items()
        if runway.turns_left is not None
    ]
    found.sort(key=lambda each: (each.runway.turns_left, -each.runway.last_prompt_tokens, each.session))
    return found[:SHOWN]


def _candidates(filters: Filters) -> dict[str, int]:
    """The `CANDIDATES` sessions with the largest prompts of the period, and their answered
    requests in it: from the session rollups when no filter but the period is chosen."""
    if plain(filters):
        return {
            s.session: s.requests for s in top_sessions(filters, by="peak_prompt_tokens", limit=CANDIDATES)
        }
    candidates = (
        log_records(filters)
        .filter(status__in=ANSWERED, prompt_tokens__gt=0)
        .annotate(session_key=session_key_expression())
        .exclude(session_key="")
        .order_by()
        .values("session_key")
        .annotate(turns=Count("id"), largest=Max("prompt_tokens"))
        .order_by("-largest", "session_key")[:CANDIDATES]
    )
    return {row["session_key"]: row["turns"] for row in candidates}
