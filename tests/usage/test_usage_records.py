from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from playground.catalog.seed import ENGINE_MODEL_ID, KIMI_K26
from playground.providers.events import Finish, TextDelta, UpstreamError, UsageReport
from playground.providers.usage_normalize import NormalizedUsage, normalize_usage
from playground.usage.calls.context import RequestContext
from playground.usage.metering import STOPPED_BY_USER, UsageMeter
from playground.usage.models import UsageRecord, UsageSource, UsageStatus
from playground.usage.records import RECORD_WRITE_FAILED, usage_record_create


def context(actors: Any, **overrides: Any) -> RequestContext:
    return RequestContext(
        team_id=actors.team.pk,
        user_id=actors.owner.pk,
        connection_id=None,
        model_id=ENGINE_MODEL_ID,
        **overrides,
    )


def meter_after(*events: Any, prompt_chars: int = 400, context_window: int | None = None) -> UsageMeter:
    meter = UsageMeter(prompt_chars=prompt_chars, context_window=context_window)
    for event in events:
        meter.observe(event)
    return meter


@pytest.mark.django_db
def test_a_finished_answer_is_recorded_with_the_providers_figures_and_its_price(actors: Any) -> None:
    usage = NormalizedUsage(
        prompt_tokens=2000, cached_tokens=1500, completion_tokens=100, raw={"prompt_tokens": 2000}
    )
    meter = meter_after(TextDelta("Hi"), UsageReport(usage), Finish("stop", upstream_request_id="ray-1"))

    record = usage_record_create(context=context(actors, affinity_key="pg-1"), outcome=meter.outcome())

    assert record.status == UsageStatus.OK
    assert record.usage_source == UsageSource.PROVIDER
    assert (record.prompt_tokens, record.cached_tokens, record.completion_tokens) == (2000, 1500, 100)
    # Priced as Kimi K2.5 on the request's day, when K2.5 is served (and billed) as K2.6.
    assert record.price_card is not None and record.price_card.model.model_id == KIMI_K26
    assert record.price_label.startswith(
        "Priced as Kimi K2.5 (retired on 2026-05-30; served as Kimi K2.6 since)"
    )
    assert record.input_cost == Decimal("0.000475")  # 500 fresh x $0.95/M
    assert record.cached_input_cost == Decimal("0.00024")
    assert record.output_cost == Decimal("0.0004")
    assert record.total_cost == Decimal("0.001115")
    assert record.upstream_request_id == "ray-1"
    assert record.affinity_key == "pg-1"
    assert record.raw_usage == {"prompt_tokens": 2000}
    assert record.ttft_ms is not None and record.latency_ms is not None


@pytest.mark.django_db
def test_a_stream_cut_short_by_the_client_is_recorded_with_estimated_tokens_so_far(actors: Any) -> None:
    meter = meter_after(TextDelta("x" * 40), prompt_chars=400)

    record = usage_record_create(context=context(actors), outcome=meter.outcome(cancelled=True))

    assert record.status == UsageStatus.CLIENT_DISCONNECTED
    assert record.usage_source == UsageSource.ESTIMATED
    assert (record.prompt_tokens, record.completion_tokens) == (100, 10)
    assert record.cached_tokens is None
    assert record.total_cost > 0


def test_a_stream_the_user_stopped_keeps_the_disconnect_status_and_says_who_stopped_it() -> None:
    outcome = meter_after(TextDelta("x" * 40)).outcome(cancelled=True, stopped_by_user=True)

    assert outcome.status == UsageStatus.CLIENT_DISCONNECTED
    assert outcome.error_code == STOPPED_BY_USER


def test_a_stop_that_came_after_the_answer_ended_changes_nothing() -> None:
    outcome = meter_after(TextDelta("Hi"), Finish("stop")).outcome(stopped_by_user=True)

    assert outcome.status == UsageStatus.OK
    assert outcome.error_code == ""


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (UpstreamError("The upstream did not finish.", code="timeout", is_timeout=True), UsageStatus.TIMEOUT),
        (UpstreamError("Capacity temporarily exceeded", http_status=429, code="3040"), UsageStatus.REJECTED),
        (UpstreamError("Internal error", http_status=500), UsageStatus.UPSTREAM_ERROR),
    ],
)
@pytest.mark.django_db
def test_upstream_failures_are_recorded_with_their_status_and_text(
    actors: Any, error: UpstreamError, status: str
) -> None:
    record = usage_record_create(context=context(actors), outcome=meter_after(error).outcome())

    assert record.status == status
    assert record.error_text == error.message
    assert record.http_status == error.http_status


def test_a_failure_before_the_first_token_bills_no_estimated_prompt() -> None:
    before = meter_after(UpstreamError("Internal error", http_status=500), prompt_chars=400).outcome()
    after = meter_after(
        TextDelta("x" * 8), UpstreamError("Internal error", http_status=500), prompt_chars=400
    ).outcome()

    assert (before.usage.prompt_tokens, before.usage.completion_tokens) == (0, 0)
    assert (after.usage.prompt_tokens, after.usage.completion_tokens) == (100, 2)


@pytest.mark.django_db
def test_a_stream_that_ends_without_finishing_is_an_upstream_error(actors: Any) -> None:
    record = usage_record_create(context=context(actors), outcome=meter_after(TextDelta("partial")).outcome())

    assert record.status == UsageStatus.UPSTREAM_ERROR


@pytest.mark.parametrize(
    "raw",
    [
        {"prompt_tokens": float("nan"), "completion_tokens": 5, "neurons": float("inf")},
        {"prompt_tokens": 3_000_000_000, "completion_tokens": 5},
        {"prompt_tokens": 12, "completion_tokens": 1e30},
    ],
    ids=["NaN", "above the column", "1e30"],
)
@pytest.mark.django_db
def test_absurd_provider_figures_are_recorded_as_estimated_flagged_and_json_safe(
    actors: Any, raw: dict[str, Any]
) -> None:
    meter = meter_after(
        TextDelta("x" * 40), UsageReport(normalize_usage(raw)), Finish("stop"), prompt_chars=400
    )

    record = usage_record_create(context=context(actors), outcome=meter.outcome())
    record.refresh_from_db()

    assert record.status == UsageStatus.OK
    assert record.error_code == ""
    assert record.usage_source == UsageSource.ESTIMATED
    assert record.usage_implausible
    assert (record.prompt_tokens, record.completion_tokens, record.cached_tokens) == (100, 10, None)
    assert record.raw_usage is not None and record.raw_usage.keys() == raw.keys()


@pytest.mark.django_db
def test_a_record_that_cannot_be_written_in_full_is_written_minimal_with_its_status(
    actors: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(**kwargs: Any) -> None:
        raise ArithmeticError("cost overflow")

    monkeypatch.setattr("playground.usage.records.cost_for", broken)
    outcome = meter_after(TextDelta("Hello"), Finish("stop", upstream_request_id="ray-9")).outcome()

    record = usage_record_create(context=context(actors, conversation_id=None), outcome=outcome)

    stored = UsageRecord.objects.get()
    assert stored.pk == record.pk
    assert (stored.team_id, stored.user_id, stored.model_id) == (
        actors.team.pk,
        actors.owner.pk,
        ENGINE_MODEL_ID,
    )
    assert stored.status == UsageStatus.OK
    assert stored.error_code == RECORD_WRITE_FAILED
    assert "ArithmeticError" in stored.error_text
    assert stored.upstream_request_id == ""  # minimal: nothing beyond the ids and the status


@pytest.mark.parametrize(("completion", "estimated"), [(1_048, False), (1_049, True)])
def test_a_report_more_than_twice_the_context_window_is_estimated_and_flagged(
    completion: int, estimated: bool
) -> None:
    report = UsageReport(normalize_usage({"prompt_tokens": 1_000, "completion_tokens": completion}))
    outcome = meter_after(TextDelta("x" * 40), report, Finish("stop"), context_window=1_024).outcome()

    assert (outcome.usage_source == UsageSource.ESTIMATED) is estimated
    assert outcome.usage.implausible is estimated
    assert outcome.usage.completion_tokens == (10 if estimated else completion)
