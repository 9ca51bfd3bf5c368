"""OpenTelemetry out: every usage record, once committed, as one GenAI span over OTLP/HTTP.

With `OTEL_EXPORTER_OTLP_ENDPOINT` set, the record writer (`services`) hands each record it
wrote to `spans_after_commit`; once the transaction commits, the record becomes a finished span
with the GenAI semantic conventions' attributes (experimental; "gen_ai.usage.input_tokens"
counts cached and cache-written tokens too), our cost, and the record's id. The span goes into the SDK's
`BatchSpanProcessor`, whose own thread sends batches with the official OTLP/HTTP exporter:
the request that wrote the record only appends to an in-memory queue. A collector that is
down or slow costs spans (the exporter retries until its timeout, then drops the batch; a full
queue drops new spans) and never a record: the record committed before its span existed. A
rolled-back record sends nothing, and a group written again one by one after its group failed
(`usage.calls.settlement`) sends each record once, since the group's callbacks went with its rollback.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Sequence
from functools import partial

from django.conf import settings
from django.db import transaction
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from playground.providers.kinds import ConnectionKind
from playground.providers.models import ProviderConnection
from playground.usage.models import UsageRecord, UsageStatus

logger = logging.getLogger(__name__)

OPERATION = "chat"
# gen_ai.provider.name: the convention's own value where it has one, ours otherwise.
PROVIDER_NAMES = {
    ConnectionKind.WORKERS_AI: "cloudflare.workers_ai",
    ConnectionKind.OPENAI_COMPATIBLE: "openai_compatible",
    ConnectionKind.ENGINE: "playground.engine",
}
UNKNOWN_PROVIDER = "unknown"  # the record's connection was deleted

_providers: dict[str, TracerProvider] = {}  # one per endpoint (tests point at several)
_providers_lock = threading.Lock()
_connection_kinds: dict[int, str] = {}  # a connection's kind never changes


def _tracer_provider(endpoint: str) -> TracerProvider:
    with _providers_lock:
        provider = _providers.get(endpoint)
        if provider is None:
            provider = TracerProvider(resource=Resource.create({"service.name": settings.OTEL_SERVICE_NAME}))
            exporter = OTLPSpanExporter(endpoint=f"{endpoint.rstrip('/')}/v1/traces")
            provider.add_span_processor(BatchSpanProcessor(exporter))
            _providers[endpoint] = provider
        return provider


def spans_flush(*, timeout_millis: int = 30_000) -> bool:
    """Send every span queued so far for the configured endpoint (for callers about to stop, and
    tests); True if all went."""
    with _providers_lock:
        provider = _providers.get(settings.OTEL_EXPORTER_OTLP_ENDPOINT)
    return provider is None or provider.force_flush(timeout_millis)


def spans_after_commit(records: Sequence[UsageRecord]) -> None:
    """Turn `records` into spans once the current transaction commits (at once outside one)."""
    if settings.OTEL_EXPORTER_OTLP_ENDPOINT and records:
        transaction.on_commit(partial(_spans_send, list(records), settings.OTEL_EXPORTER_OTLP_ENDPOINT))


def _spans_send(records: list[UsageRecord], endpoint: str) -> None:
    try:
        tracer = _tracer_provider(endpoint).get_tracer("playground.usage")
        kinds = _kinds_of({record.connection_id for record in records if record.connection_id})
        for record in records:
            _span_record(tracer, record, provider=kinds.get(record.connection_id or 0, UNKNOWN_PROVIDER))
    except Exception:  # telemetry never fails what wrote the record
        logger.exception("could not queue the spans of %d usage records", len(records))


def _kinds_of(connection_ids: set[int]) -> dict[int, str]:
    """gen_ai.provider.name of each connection, looked up once per connection and process."""
    missing = connection_ids - _connection_kinds.keys()
    if missing:
        for pk, kind in ProviderConnection.objects.filter(pk__in=missing).values_list("pk", "kind"):
            _connection_kinds[pk] = PROVIDER_NAMES.get(ConnectionKind(kind), kind)
    return {pk: _connection_kinds[pk] for pk in connection_ids if pk in _connection_kinds}


def span_attributes(record: UsageRecord, *, provider: str) -> dict[str, AttributeValue]:
    """The span's attributes: GenAI conventions, then ours under `playground.`."""
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": OPERATION,
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": record.model_id,
        "gen_ai.usage.input_tokens": record.prompt_tokens,  # cached ones included, as the convention says
        "gen_ai.usage.output_tokens": record.completion_tokens,
        "playground.record.id": str(record.request_id),
        "playground.team.id": record.team_id,
        "playground.path": record.path,
        "playground.status": record.status,
    }
    if record.cached_tokens is not None:  # unknown is not zero
        attributes["gen_ai.usage.cache_read.input_tokens"] = record.cached_tokens
    if record.cache_write_tokens is not None:
        attributes["gen_ai.usage.cache_creation.input_tokens"] = record.cache_write_tokens
    if record.price_card_id is not None:  # unpriced: no cost, rather than a cost of 0
        attributes["playground.cost.usd"] = float(record.total_cost)
        attributes["playground.price_card.id"] = record.price_card_id
    if record.upstream_request_id:
        attributes["gen_ai.response.id"] = record.upstream_request_id
    if record.conversation_id is not None:
        attributes["gen_ai.conversation.id"] = str(record.conversation_id)
    if record.status != UsageStatus.OK:
        attributes["error.type"] = record.error_code or record.status
    return attributes


def _nanoseconds(at: dt.datetime) -> int:
    return int(at.timestamp()) * 1_000_000_000 + at.microsecond * 1_000


def _span_record(tracer: Tracer, record: UsageRecord, *, provider: str) -> None:
    """One finished span for the request: it ended when its record was written, `latency_ms` before."""
    end = _nanoseconds(record.created_at)
    start = end - (record.latency_ms or 0) * 1_000_000
    span = tracer.start_span(
        f"{OPERATION} {record.model_id}",
        kind=SpanKind.CLIENT,
        start_time=start,
        attributes=span_attributes(record, provider=provider),
    )
    if record.status != UsageStatus.OK:
        span.set_status(Status(StatusCode.ERROR, record.error_code or record.status))
    span.end(end_time=end)
