"""`manage.py cache_breaks`: a session followed across the period's start, its turn counted from
the session's first request, and an affinity-key session beside a conversation."""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from playground.catalog.seed import ENGINE_MODEL_ID
from playground.usage.calls.context import RequestContext
from playground.usage.models import UsageRecord
from tests.support.actors import Actors
from tests.support.analytics import record_write
from tests.support.clock import clock

pytestmark = pytest.mark.django_db
START = dt.datetime(2026, 11, 1, 9, tzinfo=dt.UTC)


def _request(actors: Actors, at: dt.datetime, turns: int, cached: int, **where: Any) -> UsageRecord:
    messages = [{"role": "user", "content": f"question {n}"} for n in range(turns)]
    context = RequestContext(
        team_id=actors.team.pk,
        user_id=actors.owner.pk,
        connection_id=None,
        model_id=ENGINE_MODEL_ID,
        request_body={"messages": messages},
        **where,
    )
    return record_write(at, context, prompt=200 * turns, cached=cached, out=5, ttft=1, latency=2)


def _lines(*args: str) -> list[dict[str, Any]]:
    out = StringIO()
    with clock(START + dt.timedelta(days=10)):
        call_command("cache_breaks", *args, "--format", "jsonl", stdout=out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_break_after_the_period_start_counts_its_turn_from_the_session_start(actors: Actors) -> None:
    key = {"affinity_key": "agent-7"}
    for day, turns, cached in ((0, 1, 0), (3, 2, 200), (5, 3, 400), (5, 4, 0)):
        last = _request(actors, START + dt.timedelta(days=day, minutes=turns), turns, cached, **key)
    # A conversation's own requests are another session, whatever their affinity key.
    _request(actors, START + dt.timedelta(days=5), 5, 0, conversation_id=42, **key)

    lines = _lines("--team", actors.team.slug, "--since", "2026-11-05")
    card = last.price_card
    assert card is not None
    saved_per_token = (card.input_per_m - card.effective_cached_input_per_m) / 1_000_000
    assert lines == [
        {
            "record_id": last.pk,
            "session": "affinity:agent-7",
            "turn": 4,  # two of its requests lie before --since, one more than a day before
            "cause": "evicted",
            "cached_tokens": 0,
            "expected_cached_tokens": 600,
            "lost_usd": float(round(Decimal(600) * saved_per_token, 8)),
        }
    ]
    assert _lines("--team", str(actors.team.pk), "--since", "2026-11-07") == []  # the break was on the 6th


def test_an_unknown_team_is_a_clear_error(actors: Actors) -> None:
    with pytest.raises(CommandError, match="No team with the slug or id 'nope'"):
        call_command("cache_breaks", "--team", "nope")


def test_the_text_output_writes_money_in_decimals(actors: Actors) -> None:
    key = {"affinity_key": "agent-9"}
    _request(actors, START, 1, 0, **key)
    _request(
        actors, START + dt.timedelta(minutes=1), 2, 0, **key
    )  # 200 tokens lost: a few hundred-thousandths
    out = StringIO()
    with clock(START + dt.timedelta(days=1)):
        call_command("cache_breaks", "--team", actors.team.slug, "--since", "2026-11-01", stdout=out)
    line = out.getvalue().strip()
    assert "evicted" in line and "e-" not in line
    assert re.search(r"\$0\.\d{8} lost$", line), line
