"""Every usage record, once committed, reaches a loopback OTLP receiver as one GenAI span."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.db import transaction

from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K26
from playground.providers.models import ProviderConnection
from playground.providers.usage_normalize import NormalizedUsage
from playground.usage.calls.context import RequestContext
from playground.usage.metering import Outcome
from playground.usage.metrics import records_count
from playground.usage.models import RequestPath, UsageRecord, UsageSource, UsageStatus
from playground.usage.records import usage_record_create, usage_records_create_many
from playground.usage.telemetry import spans_flush
from tests.fakes.otlp import SPAN_KIND_CLIENT, OtlpReceiver
from tests.support.actors import Actors

pytestmark = pytest.mark.django_db(transaction=True)  # real commits: spans follow them


def outcome(prompt: int, cached: int | None, out: int, *, status: str = UsageStatus.OK) -> Outcome:
    return Outcome(
        status=status,
        usage=NormalizedUsage(prompt_tokens=prompt, completion_tokens=out, cached_tokens=cached),
        usage_source=UsageSource.PROVIDER,
        ttft_ms=120,
        latency_ms=1500,
        upstream_request_id=f"ray-{prompt}",
        error_code="" if status == UsageStatus.OK else "upstream_500",
    )


def context(actors: Actors, connection: ProviderConnection | None, model: str) -> RequestContext:
    return RequestContext(
        team_id=actors.team.pk,
        user_id=actors.owner.pk,
        connection_id=connection.pk if connection else None,
        model_id=model,
        path=RequestPath.GATEWAY,
    )


def test_each_record_written_alone_or_in_a_group_is_one_span_with_the_genai_attributes(
    actors: Actors, workers_connection: ProviderConnection, otlp_receiver: OtlpReceiver
) -> None:
    alone = usage_record_create(
        context=context(actors, workers_connection, KIMI_K26), outcome=outcome(2400, 2048, 35)
    )
    with transaction.atomic():
        group = usage_records_create_many(
            [
                (context(actors, None, ENGINE_MODEL_ID), outcome(1000, 0, 20)),
                (
                    context(actors, workers_connection, KIMI_K26),
                    outcome(500, None, 0, status=UsageStatus.UPSTREAM_ERROR),
                ),
            ]
        )
    assert spans_flush(timeout_millis=10_000)

    spans = otlp_receiver.by_record()
    assert len(otlp_receiver.spans) == 3
    assert {path for path, _ in otlp_receiver.requests} == {"/v1/traces"}
    assert {kind for _, kind in otlp_receiver.requests} == {"application/x-protobuf"}
    first = spans[str(alone.request_id)]
    alone.refresh_from_db()
    assert first.attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "cloudflare.workers_ai",
        "gen_ai.request.model": KIMI_K26,
        "gen_ai.usage.input_tokens": 2400,  # cached included
        "gen_ai.usage.cache_read.input_tokens": 2048,
        "gen_ai.usage.output_tokens": 35,
        "gen_ai.response.id": "ray-2400",
        "playground.cost.usd": float(alone.total_cost),
        "playground.price_card.id": alone.price_card_id,
        "playground.record.id": str(alone.request_id),
        "playground.team.id": actors.team.pk,
        "playground.path": "gateway",
        "playground.status": "ok",
    }
    assert Decimal(str(first.attributes["playground.cost.usd"])) == Decimal("0.00080208")
    assert first.name == f"chat {KIMI_K26}"
    assert first.kind == SPAN_KIND_CLIENT
    assert first.end_ns - first.start_ns == 1500 * 1_000_000
    assert first.resource["service.name"] == "playground"

    engine, failed = (spans[str(record.request_id)] for record in group)
    assert engine.attributes["gen_ai.provider.name"] == "unknown"  # no connection
    assert engine.attributes["gen_ai.usage.cache_read.input_tokens"] == 0
    assert "gen_ai.usage.cache_read.input_tokens" not in failed.attributes  # not reported: not 0
    assert failed.attributes["error.type"] == "upstream_500"
    assert failed.status_code == 2  # STATUS_CODE_ERROR


def test_a_rolled_back_group_sends_nothing_and_each_record_written_again_sends_one_span(
    actors: Actors, workers_connection: ProviderConnection, otlp_receiver: OtlpReceiver
) -> None:
    settled = [(context(actors, workers_connection, KIMI_K26), outcome(n, 0, 1)) for n in (10, 20)]
    with pytest.raises(RuntimeError), transaction.atomic():
        usage_records_create_many(settled)
        raise RuntimeError("the group's budget settlement failed")
    again = [usage_record_create(context=c, outcome=o) for c, o in settled]
    assert spans_flush(timeout_millis=10_000)

    assert UsageRecord.objects.count() == 2
    assert sorted(otlp_receiver.by_record()) == sorted(str(record.request_id) for record in again)
    assert len(otlp_receiver.spans) == 2


def test_without_an_endpoint_no_span_is_made(actors: Actors, settings: Any) -> None:
    settings.OTEL_EXPORTER_OTLP_ENDPOINT = ""
    with transaction.atomic():
        usage_record_create(context=context(actors, None, ENGINE_MODEL_ID), outcome=outcome(1, 0, 1))
        waiting = [callback for _, callback, _ in transaction.get_connection().run_on_commit]
        assert [getattr(callback, "func", callback) for callback in waiting] == [
            records_count
        ]  # the metrics only


def test_a_record_that_knows_its_cache_writes_sends_them_and_one_that_does_not_leaves_them_out(
    actors: Actors, workers_connection: ProviderConnection, otlp_receiver: OtlpReceiver
) -> None:
    written = Outcome(
        status=UsageStatus.OK,
        usage=NormalizedUsage(
            prompt_tokens=3000, completion_tokens=5, cached_tokens=1000, cache_write_tokens=1800
        ),
        usage_source=UsageSource.PROVIDER,
        ttft_ms=120,
        latency_ms=1500,
    )
    with_writes = usage_record_create(context=context(actors, workers_connection, KIMI_K26), outcome=written)
    unknown = usage_record_create(
        context=context(actors, workers_connection, KIMI_K26), outcome=outcome(3000, 1000, 5)
    )
    assert spans_flush(timeout_millis=10_000)

    spans = otlp_receiver.by_record()
    sent = spans[str(with_writes.request_id)].attributes
    assert sent["gen_ai.usage.cache_creation.input_tokens"] == 1800
    assert sent["gen_ai.usage.cache_read.input_tokens"] == 1000
    assert sent["gen_ai.usage.input_tokens"] == 3000  # reads and writes included
    assert "gen_ai.usage.cache_creation.input_tokens" not in spans[str(unknown.request_id)].attributes
