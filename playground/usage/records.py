"""The one writer of usage records (`usage_record_create`, and `usage_records_create_many` for a
settled group), and the price card that prices a call's record and its budget hold. What it writes
is also what the Prometheus metrics count (`usage.metrics`)."""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Sequence
from typing import Any

from cachetools import TTLCache
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from playground.accounts.models import StoreMode
from playground.catalog.selectors import price_card_for, price_card_label
from playground.providers.structured_answers import answer_check
from playground.usage.calls.context import RequestContext
from playground.usage.insights.cache_break_store import cache_breaks_settle
from playground.usage.metering import Outcome
from playground.usage.metrics import records_count_after_commit
from playground.usage.models import UsageRecord, UsageSource, UsageStatus
from playground.usage.prefix_digest import prefix_digest
from playground.usage.pricing import KnownCard, cost_for
from playground.usage.redaction_salt import redaction_salt
from playground.usage.rollups import rollup_add, rollups_add
from playground.usage.session_rollups import session_rollups_add
from playground.usage.statements import raw_sql
from playground.usage.storage import record_text_kept, team_store_mode
from playground.usage.telemetry import spans_after_commit

logger = logging.getLogger(__name__)

RECORD_WRITE_FAILED = "record_write_failed"
# A record keeps the first few schema errors of its answer, each cut to this length (a message
# can quote the whole offending value).
SCHEMA_ERRORS_KEPT = 5
SCHEMA_ERROR_CHARS = 300


def usage_record_create(*, context: RequestContext, outcome: Outcome) -> UsageRecord:
    """Write the request's record; if that fails for any reason, a minimal one that says so.

    A request without a record is work nobody can see or bill, so the fallback holds only
    what cannot fail: the ids, the status and `RECORD_WRITE_FAILED`. Either one becomes a span
    (`telemetry`) and is counted in the metrics (`metrics`) once it commits, both registered
    outside the savepoint so a rolled-back full record sends and counts nothing.
    """
    record = _record_or_minimal(context=context, outcome=outcome)
    spans_after_commit([record])
    records_count_after_commit([record])
    return record


def _record_or_minimal(*, context: RequestContext, outcome: Outcome) -> UsageRecord:
    try:
        with transaction.atomic():  # a savepoint: PostgreSQL refuses more statements after a failed one
            return _full_record_create(context=context, outcome=outcome)
    except Exception as exc:
        logger.exception(
            "could not write the usage record of a %s request; writing a minimal one", outcome.status
        )
        record = UsageRecord.objects.create(
            **_identity(context),
            status=outcome.status,
            usage_source=UsageSource.ESTIMATED,
            store_mode=StoreMode.METADATA,  # it keeps no text
            error_code=RECORD_WRITE_FAILED,
            error_text=f"The full usage record could not be written ({type(exc).__name__}): "
            "its tokens, cost and timings are missing.",
        )
        try:
            with transaction.atomic():
                rollup_add(record)
        except Exception:
            logger.exception("could not add a minimal usage record to the rollups; run rebuild_usage_rollups")
        return record


def request_price_card(*, context: RequestContext) -> KnownCard:
    """The card that prices the request of `context`: the team's or the global card of its model on
    the day it is priced. Pass it back as `context.price_card` to price many requests by one look-up."""
    if context.price_card is not None:
        return context.price_card
    return price_card_known(
        model_id=context.model_id, day=context.priced_on or timezone.now().date(), team_id=context.team_id
    )


# Every request looks its card up twice (the budget's hold and the record), five queries each
# time: a third of the gateway's database time (issue 24). Kept for PRICE_CARD_CACHE_SECONDS;
# a card or model saved in this process clears it at once (`price_cards_forget`, connected in
# `UsageConfig.ready`), so only another process's change waits that long.
_known_cards: TTLCache[tuple[str, dt.date, int], KnownCard] = TTLCache(
    maxsize=4096, ttl=settings.PRICE_CARD_CACHE_SECONDS
)
_known_cards_lock = threading.Lock()


def price_card_known(*, model_id: str, day: dt.date, team_id: int) -> KnownCard:
    """The card of `model_id` for `team_id` on `day`, with its label (`catalog.selectors`)."""
    key = (model_id, day, team_id)
    with _known_cards_lock:
        known = _known_cards.get(key)
    if known is not None:
        return known
    card = price_card_for(model_id=model_id, day=day, team_id=team_id)
    label = price_card_label(model_id=model_id, card=card, day=day) if card is not None else ""
    known = KnownCard(card, model_id=model_id, day=day, label=label)
    with _known_cards_lock:
        _known_cards[key] = known
    return known


def price_cards_forget(**_: object) -> None:
    """Drop every cached card (a signal receiver: a card or a catalogue model changed)."""
    with _known_cards_lock:
        _known_cards.clear()


def usage_records_create_many(settled: Sequence[tuple[RequestContext, Outcome]]) -> list[UsageRecord]:
    """Write the full records of requests that ended together, in one INSERT, and their rollups
    (`rollups_add`), in the caller's transaction; raises if any cannot be written (the caller
    then writes each with `usage_record_create`, which falls back to a minimal record)."""
    modes: dict[int, str] = {}  # each team's storage mode, read once for the group (a batch step: hundreds)
    for context, _ in settled:
        if not context.store and context.team_id not in modes:
            modes[context.team_id] = team_store_mode(context.team_id)
    records = raw_sql.insert_many(
        [
            _full_record(context=context, outcome=outcome, team_mode=modes.get(context.team_id, ""))
            for context, outcome in settled
        ]
    )
    rollups_add(records)
    session_rollups_add(records)
    cache_breaks_settle(records)
    spans_after_commit(records)  # dropped with the caller's transaction if it rolls back, as is
    records_count_after_commit(records)
    return records


def _full_record_create(*, context: RequestContext, outcome: Outcome) -> UsageRecord:
    record = _full_record(context=context, outcome=outcome)
    record.save(force_insert=True)
    rollup_add(record)  # same transaction: the record and its rollups commit together
    session_rollups_add([record])
    cache_breaks_settle([record])  # and the cache break it is, if any (issue 40)
    return record


def _full_record(*, context: RequestContext, outcome: Outcome, team_mode: str = "") -> UsageRecord:
    """`team_mode`: the team's storage mode when the caller read it already (else read here)."""
    known = request_price_card(context=context)
    card = known.card
    cost = cost_for(usage=outcome.usage, card=card).stored()
    usage = outcome.usage
    schema = _schema_conformance(context=context, outcome=outcome)
    # Redacted before anything is written; the digests are of the body as sent (issue 37).
    kept = record_text_kept(
        mode=context.store or team_mode or team_store_mode(context.team_id),
        request_body=context.request_body,
        variables=context.variables,
        error_text=outcome.error_text,
        schema_errors=schema.pop("schema_errors", None),
        redaction=context.redaction,
        salt=redaction_salt(context),
    )
    return UsageRecord(
        **_identity(context),
        affinity_key=context.affinity_key,
        streamed=context.streamed,
        status=outcome.status,
        prompt_tokens=usage.prompt_tokens,
        cached_tokens=usage.cached_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        completion_tokens=usage.completion_tokens,
        reasoning_tokens=usage.reasoning_tokens,
        usage_source=outcome.usage_source,
        raw_usage=dict(usage.raw) or None,
        usage_implausible=usage.implausible,
        price_card=card,
        price_label=known.label[:300],
        input_cost=cost.input,
        cached_input_cost=cost.cached_input,
        cache_write_cost=cost.cache_write,
        output_cost=cost.output,
        total_cost=cost.total,
        ttft_ms=outcome.ttft_ms,
        latency_ms=outcome.latency_ms,
        upstream_request_id=outcome.upstream_request_id[:200],
        http_status=outcome.http_status,
        error_code=outcome.error_code[:40],
        error_text=kept.error_text,
        request_body=kept.request_body,
        variables=kept.variables,
        store_mode=kept.store_mode,
        redactions=kept.redactions,
        prefix_digest=_digest_stored(context.request_body),
        schema_errors=kept.schema_errors,
        **schema,
    )


def _digest_stored(body: dict[str, Any] | None) -> dict[str, Any] | None:
    digest = prefix_digest(body)
    return digest.stored() if digest is not None else None


def _schema_conformance(*, context: RequestContext, outcome: Outcome) -> dict[str, Any]:
    """The record's schema fields: whether a whole answer held to the JSON format it was asked
    for. Only an answer that came back whole (`ok`) is judged; one cut short, stopped or empty
    (tool calls only) says nothing about the model's conformance and stays unchecked (None)."""
    asked = context.answer_format
    if asked is None:
        return {}
    fields: dict[str, Any] = {"schema_name": asked.name[:64]}
    if outcome.status != UsageStatus.OK or outcome.answer_text is None:
        return fields
    check = answer_check(text=outcome.answer_text, answer_format=asked)
    if check is None:
        return fields
    errors = [
        {"path": issue.path[:SCHEMA_ERROR_CHARS], "message": issue.message[:SCHEMA_ERROR_CHARS]}
        for issue in check.issues[:SCHEMA_ERRORS_KEPT]
    ]
    return {**fields, "schema_valid": check.valid, "schema_errors": errors}


def _identity(context: RequestContext) -> dict[str, Any]:
    return {
        "team_id": context.team_id,
        "user_id": context.user_id,
        "connection_id": context.connection_id,
        "model_id": context.model_id,
        "conversation_id": context.conversation_id,
        "preset_version_id": context.preset_version_id,
        "path": context.path,
        "source": context.source,
        **context.attribution.record_fields(),
        **context.route.record_fields(),
        **({"request_id": context.request_id} if context.request_id is not None else {}),
    }
