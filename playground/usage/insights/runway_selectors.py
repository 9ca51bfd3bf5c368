"""A session's runway (`usage.insights.runway`) from its stored records: one read of the latest few.

The chat shows its conversation's under the composer; the dashboard ranks the period's
sessions by it. Only the session's latest answered requests on its latest model count: a
model switched mid-session starts a new runway (another window, another tokenizer). The
tokens are the records' (as the provider counted them, or estimated when it reported none:
the runway says so), the window the model's on the latest record's connection
(`providers.context_windows`: as served, else the catalogue's).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import replace
from itertools import groupby
from operator import attrgetter
from typing import Protocol

from django.db.models import F, QuerySet, Window
from django.db.models.functions import RowNumber

from playground.providers.context_windows import ContextWindow, context_window_for
from playground.providers.models import ProviderConnection
from playground.usage.insights.cache_break_selectors import ANSWERED
from playground.usage.insights.runway import Runway, Turn, session_runway
from playground.usage.insights.sessions import (
    session_filter,
    session_key,
    session_key_expression,
    sessions_filter,
)
from playground.usage.models import UsageRecord, UsageSource

LATEST = 30  # records read back from the session's newest


class WindowLookup(Protocol):
    """`context_window_for`'s signature."""

    def __call__(
        self, *, connection: ProviderConnection | None, model_id: str, day: dt.date
    ) -> ContextWindow | None: ...


def session_runway_get(
    *, team_id: int, session: str, since: dt.datetime | None = None, until: dt.datetime | None = None
) -> Runway | None:
    """The runway of session `session` (a `sessions.session_key`) of the team, or None; from its
    records in [since, until) when given (the dashboard's period: the read stays in its range)."""
    records = _answered(team_id=team_id, since=since, until=until).filter(session_filter(session))
    latest = list(records.order_by("-created_at", "-id")[:LATEST])
    return runway_from_records(latest[::-1])


def sessions_runways(
    *, team_id: int, sessions: Sequence[str], since: dt.datetime, until: dt.datetime
) -> dict[str, Runway]:
    """`session_runway_get` of each of `sessions` over [since, until), in one read: the latest
    `LATEST` records of each (a window over the sessions' records, found by their indexed
    columns). Sessions without a runway are left out."""
    latest = (
        _answered(team_id=team_id, since=since, until=until)
        .filter(sessions_filter(sessions))
        .annotate(
            session_key=session_key_expression(),
            newest=Window(
                RowNumber(),
                partition_by=[session_key_expression()],
                order_by=[F("created_at").desc(), F("id").desc()],
            ),
        )
        .filter(newest__lte=LATEST)
        .order_by("session_key", "created_at", "id")
    )
    # Sessions share a few models and connections: each window is looked up once.
    windows: dict[tuple[int | None, str, dt.date], ContextWindow | None] = {}

    def window_once(
        *, connection: ProviderConnection | None, model_id: str, day: dt.date
    ) -> ContextWindow | None:
        key = (connection.pk if connection is not None else None, model_id, day)
        if key not in windows:
            windows[key] = context_window_for(connection=connection, model_id=model_id, day=day)
        return windows[key]

    runways = {}
    for key, records in groupby(latest, key=attrgetter("session_key")):
        runway = runway_from_records(list(records), window_for=window_once)
        if runway is not None:
            runways[key] = runway
    return runways


def _answered(*, team_id: int, since: dt.datetime | None, until: dt.datetime | None) -> QuerySet[UsageRecord]:
    """The team's answered records in [since, until), with what a runway reads of them."""
    records = UsageRecord.objects.filter(team_id=team_id, status__in=ANSWERED, prompt_tokens__gt=0)
    if since is not None:
        records = records.filter(created_at__gte=since)
    if until is not None:
        records = records.filter(created_at__lt=until)
    return records.select_related("price_card", "connection").only(
        "model_id",
        "usage_source",
        "connection",
        "prompt_tokens",
        "cached_tokens",
        "cache_write_tokens",
        "completion_tokens",
        "created_at",
        "price_card",
        "conversation_id",
        "session",
        "affinity_key",
    )


def conversation_runway(*, team_id: int, conversation_id: int) -> Runway | None:
    session = session_key(conversation_id=conversation_id, session="", affinity_key="")
    return session_runway_get(team_id=team_id, session=session)


def runway_from_records(
    records: Sequence[UsageRecord], *, window_for: WindowLookup = context_window_for
) -> Runway | None:
    """The runway of a session's answered records, oldest first (their price cards and
    connections loaded); `window_for` finds the model's context window."""
    if not records:
        return None
    last = records[-1]
    tail: list[UsageRecord] = []
    for record in reversed(records):
        if record.model_id != last.model_id:
            break
        tail.append(record)
    window = window_for(connection=last.connection, model_id=last.model_id, day=last.created_at.date())
    turns = [
        Turn(
            prompt_tokens=record.prompt_tokens,
            cached_tokens=record.cached_tokens,
            completion_tokens=record.completion_tokens,
            cache_write_tokens=record.cache_write_tokens,
        )
        for record in reversed(tail)
    ]
    runway = session_runway(turns, context_window=window.tokens if window else None, card=last.price_card)
    if runway is None or window is None:
        return None
    return replace(
        runway,
        model_id=last.model_id,
        window_source=window.source,
        estimated=any(record.usage_source == UsageSource.ESTIMATED for record in tail),
    )
