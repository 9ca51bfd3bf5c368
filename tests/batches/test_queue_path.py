"""The queue path against a loopback Workers AI: chunks, polling backoff, out-of-order results,
retries of 429/5xx, an unknown request_id, expiry, and redelivered steps that change nothing."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import httpx
import pytest
from django.utils import timezone

from playground.batches.models import Batch, BatchItem, BatchPath, BatchSubmission, ItemState, SubmissionState
from playground.batches.services import metered_item
from playground.batches.services.actions import batch_retry_failed
from playground.batches.services.queue_path import SizedItem, chunk_by_size, submission_items
from playground.batches.services.queue_results import match_responses, poll_delay, queue_reference
from playground.batches.services.step import batch_step_run
from playground.catalog.models import PriceCard
from playground.catalog.selectors import price_card_for
from playground.providers import http
from playground.providers.http import checked_transport
from playground.providers.models import ProviderConnection
from playground.providers.queue import QueueResponse
from playground.usage import records as usage_records
from playground.usage.models import TeamBudget, UsageRecord
from tests.fakes.upstream import (
    FakeUpstream,
    chat_completion,
    computed,
    envelope,
    error,
    json_reply,
    usage,
    v4_error,
)
from tests.support.actors import Actors
from tests.support.batches import prompts

pytestmark = pytest.mark.django_db


def _queued(request_id: str = "req-1") -> Any:
    return json_reply(envelope({"status": "queued", "request_id": request_id, "model": "m"}))


def _pending() -> Any:
    return json_reply(envelope({"status": "running", "request_id": "req-1"}))


def _results(batch: Batch, order: list[int], *, by: str = "reference") -> Any:
    items = {item.index: item for item in batch.items.all()}
    responses = []
    for index in order:
        item = items[index]
        response: dict[str, Any] = {
            "id": item.position,
            "result": chat_completion(f"Answer {index}", usage_body=usage(10 + index, 5, cached=4)),
            "success": True,
        }
        if by == "reference":
            response["external_reference"] = queue_reference(item)
        responses.append(response)
    return json_reply(envelope({"responses": responses, "usage": usage(1, 1)}))


def _step(batch: Batch) -> float | None:
    batch.refresh_from_db()
    return batch_step_run(batch_id=batch.pk, token=batch.chain_token)


def _text(item: BatchItem) -> str:
    """The answer text of an item that has a response."""
    assert item.response is not None
    return str(item.response["text"])


def test_it_chunks_submissions_under_the_byte_limit() -> None:
    items = [SizedItem(pk, size) for pk, size in enumerate([400, 300, 300, 900, 10, 10])]

    chunks = list(chunk_by_size(items, max_bytes=1000, max_items=100))

    assert [[item.pk for item in chunk] for chunk in chunks] == [[0, 1], [2], [3, 4, 5]]
    for chunk in chunks:
        assert len(b'{"requests":[]}') + sum(i.size for i in chunk) + len(chunk) - 1 < 1000


def test_it_refuses_an_item_that_alone_is_over_the_limit() -> None:
    with pytest.raises(ValueError, match="over the 100-byte submission limit"):
        list(chunk_by_size([SizedItem(1, 200)], max_bytes=100, max_items=10))


def test_each_real_submission_body_stays_under_the_limit(
    workers_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    running_batch: Callable[..., Batch],
    settings: Any,
) -> None:
    settings.BATCH_SUBMISSION_MAX_BYTES = 2_000
    batch = running_batch(workers_connection, [{"messages": [{"role": "user", "content": "x" * 300}]}] * 12)
    fake_upstream.script(*[_queued(f"req-{n}") for n in range(12)])

    _step(batch)

    bodies = [request for request in fake_upstream.requests if request.json and "requests" in request.json]
    assert len(bodies) == BatchSubmission.objects.filter(batch=batch).count() > 1
    assert sum(len(body.json["requests"]) for body in bodies) == 12
    assert all(len(json.dumps(body.json, separators=(",", ":")).encode()) < 2_000 for body in bodies)
    assert all("?queueRequest=true" in body.path for body in bodies)


def test_it_matches_results_that_arrive_out_of_order_and_records_each_item_once(
    workers_connection: ProviderConnection, fake_upstream: FakeUpstream, running_batch: Callable[..., Batch]
) -> None:
    batch = running_batch(workers_connection, prompts(4))
    assert batch.path == BatchPath.QUEUE
    fake_upstream.script(_queued(), _pending())
    _step(batch)  # submit
    assert set(batch.items.values_list("state", flat=True)) == {ItemState.SUBMITTED}
    BatchSubmission.objects.update(next_poll_at=timezone.now())
    _step(batch)  # still running
    fake_upstream.script(_results(batch, [3, 0, 2, 1]))
    BatchSubmission.objects.update(next_poll_at=timezone.now())

    assert _step(batch) is None  # finished

    batch.refresh_from_db()
    assert batch.status == "done"
    for item in batch.items.select_related("usage_record"):
        assert item.state == ItemState.DONE
        assert item.response is not None and item.usage_record is not None
        assert item.response["text"] == f"Answer {item.index}"
        assert item.usage_record.source == f"batch-item:{item.pk}:1"
        assert item.usage_record.prompt_tokens == 10 + item.index
        assert item.usage_record.cached_tokens == 4
        assert item.usage_record.path == "batch"
    assert UsageRecord.objects.count() == 4


def test_a_queued_items_record_has_the_turnaround_as_latency_and_no_ttft(
    workers_connection: ProviderConnection, fake_upstream: FakeUpstream, running_batch: Callable[..., Batch]
) -> None:
    """Results are replayed from a poll at our pace: measured, they read 0-1 ms for answers
    that waited in the queue, and filled the latency and TTFT charts with false figures."""
    batch = running_batch(workers_connection, prompts(2))
    fake_upstream.script(_queued())
    _step(batch)  # submit
    BatchSubmission.objects.update(
        submitted_at=timezone.now() - dt.timedelta(seconds=90), next_poll_at=timezone.now()
    )
    fake_upstream.script(_results(batch, [1, 0]))

    _step(batch)

    records = list(UsageRecord.objects.filter(path="batch"))
    assert len(records) == 2
    assert all(record.ttft_ms is None for record in records)
    assert all(record.latency_ms is not None and 90_000 <= record.latency_ms < 100_000 for record in records)


def test_it_matches_by_position_when_no_reference_comes_back(
    workers_connection: ProviderConnection, fake_upstream: FakeUpstream, running_batch: Callable[..., Batch]
) -> None:
    batch = running_batch(workers_connection, prompts(3))
    fake_upstream.script(_queued())
    _step(batch)
    fake_upstream.script(_results(batch, [2, 1, 0], by="id"))
    BatchSubmission.objects.update(next_poll_at=timezone.now())

    _step(batch)

    assert [_text(item) for item in batch.items.order_by("index")] == [
        "Answer 0",
        "Answer 1",
        "Answer 2",
    ]


def test_match_responses_ignores_strangers_and_duplicates() -> None:
    class Item:
        def __init__(self, pk: int, position: int) -> None:
            self.pk, self.position, self.attempt = pk, position, 1

    items: list[Any] = [Item(10, 0), Item(11, 1)]
    responses = [
        QueueResponse(id=1, external_reference="item-10-1", success=True, result={}),  # reference wins
        QueueResponse(id=7, external_reference=None, success=True, result={}),  # nobody's
        QueueResponse(id=0, external_reference=None, success=True, result={}),  # item 10 again
        QueueResponse(id=1, external_reference=None, success=True, result={}),
    ]

    pairs = match_responses(responses, items)

    assert [(item.pk, response.id) for item, response in pairs] == [(10, 1), (11, 1)]


def test_it_prices_items_by_the_card_of_the_day_the_batch_was_submitted(
    workers_connection: ProviderConnection, fake_upstream: FakeUpstream, running_batch: Callable[..., Batch]
) -> None:
    batch = running_batch(workers_connection, prompts(1), model="@cf/moonshotai/kimi-k2.5")
    Batch.objects.filter(pk=batch.pk).update(priced_on=dt.date(2026, 5, 1))  # before K2.5 became K2.6
    batch.refresh_from_db()
    fake_upstream.script(_queued())
    _step(batch)
    fake_upstream.script(_results(batch, [0]))
    BatchSubmission.objects.update(next_poll_at=timezone.now())
    _step(batch)

    record = UsageRecord.objects.get()
    assert record.price_card == price_card_for(model_id="@cf/moonshotai/kimi-k2.5", day=dt.date(2026, 5, 1))
    assert record.price_card != price_card_for(model_id="@cf/moonshotai/kimi-k2.5", day=timezone.now().date())


def test_a_poll_prices_its_results_by_one_look_up_of_the_card(
    workers_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    running_batch: Callable[..., Batch],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batch = running_batch(workers_connection, prompts(4))
    fake_upstream.script(_queued())
    _step(batch)
    looked_up: list[dict[str, Any]] = []

    def looking_up(**query: Any) -> PriceCard | None:
        looked_up.append(query)
        return price_card_for(**query)

    monkeypatch.setattr(usage_records, "price_card_for", looking_up)
    usage_records.price_cards_forget()  # the first step's look-up is not kept to this one
    fake_upstream.script(_results(batch, [0, 1, 2, 3]))
    BatchSubmission.objects.update(next_poll_at=timezone.now())

    _step(batch)

    assert batch.priced_on is not None
    card = price_card_for(model_id=batch.model_id, day=batch.priced_on, team_id=batch.team_id)
    assert card is not None
    assert [(r.price_card_id, r.total_cost > 0) for r in UsageRecord.objects.all()] == [(card.pk, True)] * 4
    assert looked_up == [{"model_id": batch.model_id, "day": batch.priced_on, "team_id": batch.team_id}]


def test_a_step_sends_and_polls_on_one_event_loop_and_http_client(
    workers_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    running_batch: Callable[..., Batch],
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings.BATCH_SUBMISSION_MAX_ITEMS, settings.BATCH_POLL_FIRST_SECONDS = 1, 0.0  # polled in the same step
    batch = running_batch(workers_connection, prompts(3))
    clients: list[httpx.Limits] = []

    def counting(limits: httpx.Limits, *, pools: int = 1) -> httpx.AsyncBaseTransport:
        clients.append(limits)
        return checked_transport(limits, pools=pools)

    monkeypatch.setattr(http, "checked_transport", counting)
    fake_upstream.script(
        _queued("req-1"), _queued("req-2"), _queued("req-3"), _pending(), _pending(), _pending()
    )

    _step(batch)

    assert len(fake_upstream.requests) == 6
    assert len(clients) == 1  # was a new loop and client per call (tens of ms of CPU each)


def test_a_step_that_fails_while_recording_leaves_no_record_without_its_result(
    workers_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    running_batch: Callable[..., Batch],
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batch = running_batch(workers_connection, prompts(4))
    fake_upstream.script(_queued())
    _step(batch)
    recorded: list[int] = []
    item_result = metered_item._item_result  # the item's result, written with its record

    def dies_at_the_third(item: BatchItem, *args: Any) -> None:
        recorded.append(item.pk)
        if len(recorded) == 3:
            raise RuntimeError("the worker died here")
        item_result(item, *args)

    monkeypatch.setattr(metered_item, "_item_result", dies_at_the_third)
    fake_upstream.script(_results(batch, [0, 1, 2, 3]))
    BatchSubmission.objects.update(next_poll_at=timezone.now())

    assert _step(batch) == settings.BATCH_STEP_RETRY_SECONDS
    assert len(recorded) == 3
    done = batch.items.filter(state=ItemState.DONE)
    assert UsageRecord.objects.count() == done.count()  # whatever committed has its result
    assert all(item.usage_record is not None for item in done)

    monkeypatch.setattr(metered_item, "_item_result", item_result)
    fake_upstream.script(_results(batch, [3, 2, 1, 0]))
    BatchSubmission.objects.update(next_poll_at=timezone.now())

    assert _step(batch) is None
    assert UsageRecord.objects.count() == 4
    assert {
        (item.state, item.usage_record and item.usage_record.source)
        for item in batch.items.select_related("usage_record")
    } == {(ItemState.DONE, item.source) for item in batch.items.all()}


def test_polls_back_off_up_to_a_cap_below_the_visibility_timeout(settings: Any) -> None:
    delays = [poll_delay(n) for n in range(20)]

    assert delays[0] == settings.BATCH_POLL_FIRST_SECONDS
    assert all(later >= earlier for earlier, later in itertools.pairwise(delays))
    assert delays[-1] == settings.BATCH_POLL_MAX_SECONDS
    assert settings.BATCH_POLL_MAX_SECONDS < 3600


def test_the_wait_stays_under_a_tenth_of_the_time_already_waited(settings: Any) -> None:
    settings.BATCH_POLL_FIRST_SECONDS, settings.BATCH_POLL_MAX_SECONDS = 1.0, 60.0

    assert poll_delay(10, waited=30) == 3.0  # the backoff alone would say 57.7 s
    assert poll_delay(10, waited=2) == 1.0  # never under the first wait
    assert poll_delay(10, waited=6000) == 57.6650390625  # the backoff (under the cap) when it is shorter


def test_a_pending_poll_schedules_the_next_one_later_each_time(
    workers_connection: ProviderConnection, fake_upstream: FakeUpstream, running_batch: Callable[..., Batch]
) -> None:
    batch = running_batch(workers_connection, prompts(2))
    fake_upstream.script(_queued(), _pending(), _pending(), _pending())
    countdowns = [_step(batch)]
    for _ in range(3):  # long after the submission, so only the backoff sets the wait
        BatchSubmission.objects.update(
            next_poll_at=timezone.now(), submitted_at=timezone.now() - dt.timedelta(hours=1)
        )
        countdowns.append(_step(batch))

    assert countdowns == pytest.approx([poll_delay(0), poll_delay(1), poll_delay(2), poll_delay(3)], abs=0.5)
    assert BatchSubmission.objects.get().polls == 3


def test_a_429_on_submit_and_a_503_on_poll_are_retried_with_backoff(
    workers_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    running_batch: Callable[..., Batch],
    settings: Any,
) -> None:
    settings.UPSTREAM_MAX_RETRIES = 0  # past the request's own retries: the step reschedules
    batch = running_batch(workers_connection, prompts(2))
    fake_upstream.script(error(429, v4_error(3040, "Capacity temporarily exceeded")))

    countdown = _step(batch)

    submission = BatchSubmission.objects.get()
    assert submission.state == SubmissionState.SUBMITTING and submission.submit_attempts == 1
    assert countdown == pytest.approx(poll_delay(1), abs=0.5)
    assert "Capacity temporarily exceeded" in submission.error
    fake_upstream.script(_queued())
    BatchSubmission.objects.update(next_poll_at=timezone.now())
    _step(batch)
    fake_upstream.script(error(503))
    BatchSubmission.objects.update(next_poll_at=timezone.now())
    countdown = _step(batch)
    submission.refresh_from_db()
    assert submission.state == SubmissionState.POLLING and submission.poll_errors == 1
    assert countdown is not None and countdown > 0
    fake_upstream.script(_results(batch, [1, 0]))
    BatchSubmission.objects.update(next_poll_at=timezone.now())
    _step(batch)
    assert set(batch.items.values_list("state", flat=True)) == {ItemState.DONE}


def test_an_unknown_request_id_fails_its_items_with_the_reason(
    workers_connection: ProviderConnection, fake_upstream: FakeUpstream, running_batch: Callable[..., Batch]
) -> None:
    batch = running_batch(workers_connection, prompts(2))
    fake_upstream.script(
        _queued("lost-id"), error(404, v4_error(8001, "No queued request has request_id 'lost-id'."))
    )
    _step(batch)
    BatchSubmission.objects.update(next_poll_at=timezone.now())

    assert _step(batch) is None

    for item in batch.items.all():
        assert item.state == ItemState.FAILED
        assert item.error_code == "unknown_request_id"
        assert "lost-id" in item.error
    assert UsageRecord.objects.count() == 0


def test_results_that_never_come_expire_with_a_reason(
    workers_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    running_batch: Callable[..., Batch],
    settings: Any,
) -> None:
    settings.BATCH_RESULT_EXPIRY_SECONDS = 60
    batch = running_batch(workers_connection, prompts(1))
    fake_upstream.script(_queued())
    _step(batch)
    BatchSubmission.objects.update(
        next_poll_at=timezone.now(), submitted_at=timezone.now() - dt.timedelta(minutes=2)
    )

    _step(batch)

    item = batch.items.get()
    assert item.state == ItemState.FAILED and item.error_code == "expired"
    assert "No result arrived within 60 s" in item.error


def test_a_failed_item_result_is_recorded_as_an_upstream_error(
    workers_connection: ProviderConnection, fake_upstream: FakeUpstream, running_batch: Callable[..., Batch]
) -> None:
    batch = running_batch(workers_connection, prompts(1))
    fake_upstream.script(_queued())
    _step(batch)
    item = batch.items.get()
    failure = {
        "id": 0,
        "external_reference": queue_reference(item),
        "success": False,
        "result": v4_error(8001, "bad input"),
    }
    fake_upstream.script(json_reply(envelope({"responses": [failure]})))
    BatchSubmission.objects.update(next_poll_at=timezone.now())

    _step(batch)

    item.refresh_from_db()
    assert item.state == ItemState.FAILED and "bad input" in item.error
    assert item.usage_record is not None and item.usage_record.status == "upstream_error"


def test_a_redelivered_step_and_a_stale_chain_change_nothing(
    workers_connection: ProviderConnection, fake_upstream: FakeUpstream, running_batch: Callable[..., Batch]
) -> None:
    batch = running_batch(workers_connection, prompts(3))
    old_token = batch.chain_token
    fake_upstream.script(_queued())
    _step(batch)
    # The poll's results are processed, then the same results are delivered again (a redelivered step).
    Batch.objects.filter(pk=batch.pk).update(finished_at=None)
    fake_upstream.script(_results(batch, [0, 1, 2]))
    BatchSubmission.objects.update(next_poll_at=timezone.now())
    _step(batch)
    sent = len(fake_upstream.requests)
    BatchSubmission.objects.update(state=SubmissionState.POLLING, next_poll_at=timezone.now())
    Batch.objects.filter(pk=batch.pk).update(finished_at=None, status="running")
    fake_upstream.script(_results(batch, [2, 1, 0]))
    _step(batch)

    assert UsageRecord.objects.count() == 3  # nothing recorded twice
    assert set(batch.items.values_list("state", flat=True)) == {ItemState.DONE}
    assert batch_step_run(batch_id=batch.pk, token="not-the-owner") is None
    assert batch_step_run(batch_id=batch.pk, token=old_token) is None  # finished: nothing left to do
    assert len(fake_upstream.requests) == sent + 1


def test_the_oldest_open_submission_is_polled_by_the_time_since_the_last_results_later_ones_by_the_backoff(
    workers_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    running_batch: Callable[..., Batch],
    settings: Any,
) -> None:
    settings.BATCH_SUBMISSION_MAX_ITEMS, settings.BATCH_POLL_MAX_SECONDS = 1, 60.0
    batch = running_batch(workers_connection, prompts(3))
    fake_upstream.script(_queued("req-1"), _queued("req-2"), _queued("req-3"))
    _step(batch)
    first, second, third = BatchSubmission.objects.order_by("id")
    an_hour_ago, news = timezone.now() - dt.timedelta(hours=1), timezone.now() - dt.timedelta(seconds=20)
    BatchSubmission.objects.filter(pk=first.pk).update(state=SubmissionState.DONE)
    first.items.update(state=ItemState.DONE, finished_at=news)
    BatchSubmission.objects.filter(pk=second.pk).update(
        submitted_at=an_hour_ago, polls=10, next_poll_at=timezone.now()
    )
    BatchSubmission.objects.filter(pk=third.pk).update(
        submitted_at=timezone.now() - dt.timedelta(seconds=100), polls=7, next_poll_at=timezone.now()
    )
    fake_upstream.script(_pending(), _pending())

    _step(batch)

    second.refresh_from_db()
    third.refresh_from_db()
    assert second.next_poll_at is not None and third.next_poll_at is not None
    assert (second.next_poll_at - timezone.now()).total_seconds() == pytest.approx(2.0, abs=0.5)  # 20 s / 10
    # An in-order queue finishes the second first: the third is not also polled every tenth of 100 s.
    assert (third.next_poll_at - timezone.now()).total_seconds() == pytest.approx(poll_delay(8), abs=0.5)
    assert poll_delay(8) > 20


def test_when_results_come_in_the_next_oldest_submission_is_polled_soon_not_after_its_backoff(
    workers_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    running_batch: Callable[..., Batch],
    settings: Any,
) -> None:
    settings.BATCH_SUBMISSION_MAX_ITEMS, settings.BATCH_POLL_MAX_SECONDS = 1, 60.0
    batch = running_batch(workers_connection, prompts(3))
    fake_upstream.script(_queued("req-1"), _queued("req-2"), _queued("req-3"))
    _step(batch)
    first, second, third = BatchSubmission.objects.order_by("id")
    later = timezone.now() + dt.timedelta(seconds=50)  # where the plain backoff had put them
    BatchSubmission.objects.filter(pk=first.pk).update(next_poll_at=timezone.now())
    BatchSubmission.objects.filter(pk__in=[second.pk, third.pk]).update(next_poll_at=later, polls=9)
    fake_upstream.script(_results(batch, [0]))

    countdown = _step(batch)

    first.refresh_from_db()
    second.refresh_from_db()
    third.refresh_from_db()
    assert first.state == SubmissionState.DONE
    assert second.next_poll_at is not None
    assert (second.next_poll_at - timezone.now()).total_seconds() == pytest.approx(poll_delay(0), abs=0.5)
    assert countdown == pytest.approx(poll_delay(0), abs=0.5)
    assert third.next_poll_at == later  # behind the second, it keeps its backoff


def test_a_batch_is_split_into_about_ten_submissions_within_the_bounds(settings: Any) -> None:
    settings.BATCH_SUBMISSION_MAX_ITEMS = 500

    assert submission_items(20) == 100  # the floor: a small batch goes out whole
    assert submission_items(1_000) == 100  # ten, so nine are recorded while the queue runs the rest
    assert submission_items(2_345) == 235
    assert submission_items(50_000) == 500  # the cap: a hundred submissions, not five hundred


def test_a_submission_the_budget_refuses_is_not_sent_and_leaves_rejected_records(
    workers_connection: ProviderConnection, fake_upstream: FakeUpstream, running_batch: Callable[..., Batch]
) -> None:
    batch = running_batch(workers_connection, prompts(3, max_tokens=1000))
    TeamBudget.objects.create(
        team_id=batch.team_id, monthly_limit_usd=Decimal("0.000001"), alert_thresholds=[]
    )

    _step(batch)

    assert fake_upstream.requests == []
    records = UsageRecord.objects.filter(path="batch")
    assert records.count() == 3
    assert {(r.status, r.total_cost, r.error_code) for r in records} == {("rejected", 0, "budget_exceeded")}
    for item in batch.items.all():
        assert item.state == ItemState.FAILED
        assert item.error_code == "budget_exceeded"
        assert item.usage_record is not None and item.usage_record.source == item.source
        assert "remains this month" in item.error


class StrictQueue:
    """A loopback Workers AI queue with a limit of its own that no catalogue knows: it refuses a
    whole submission in which an item asks for more than 100 `max_tokens`, naming the first such
    item as the engine and Workers AI name one (`requests[N]: ...`, error 8001), and answers
    every item of a submission it accepted with the item's own prompt."""

    LIMIT = 100

    def __init__(self) -> None:
        self.accepted: dict[str, list[dict[str, Any]]] = {}

    def reply(self, request: Any) -> Any:
        body = request.json
        if "requests" in body:
            for position, item in enumerate(body["requests"]):
                if item.get("max_tokens", 0) > self.LIMIT:
                    message = (
                        f"requests[{position}]: `max_tokens` must be at most {self.LIMIT} on this "
                        f"deployment; got {item['max_tokens']}."
                    )
                    return error(400, v4_error(8001, message))
            request_id = f"req-{len(self.accepted)}"
            self.accepted[request_id] = body["requests"]
            return _queued(request_id)
        answers = [
            {
                "id": position,
                "external_reference": item["external_reference"],
                "success": True,
                "result": chat_completion(f"About {item['messages'][-1]['content']}", usage_body=usage(9, 3)),
            }
            for position, item in enumerate(self.accepted[body["request_id"]])
        ]
        return json_reply(envelope({"responses": answers}))


def _run(batch: Batch, steps: int = 10) -> None:
    for _ in range(steps):
        BatchSubmission.objects.update(next_poll_at=timezone.now())
        if _step(batch) is None:
            return
    raise AssertionError("the batch did not finish")


def test_an_item_the_provider_refuses_fails_alone_and_the_others_are_sent_again_without_it(
    workers_connection: ProviderConnection, fake_upstream: FakeUpstream, running_batch: Callable[..., Batch]
) -> None:
    queue = StrictQueue()
    fake_upstream.script(*[computed(queue.reply)] * 10)
    rows = prompts(6, max_tokens=50)
    rows[1]["max_tokens"], rows[4]["max_tokens"] = 500, 700  # within the model's window: the check passes
    batch = running_batch(workers_connection, rows)

    _run(batch)

    items = {item.index: item for item in batch.items.all()}
    assert {index for index, item in items.items() if item.state == ItemState.FAILED} == {1, 4}
    assert items[1].error == (
        "The provider refused this item: `max_tokens` must be at most 100 on this deployment; got 500."
    )
    assert items[4].error.endswith("got 700.")  # its own error, never its neighbour's
    assert items[1].input_refused and items[4].input_refused and items[1].error_code == "8001"
    for index in (0, 2, 3, 5):
        assert items[index].state == ItemState.DONE and items[index].error == ""
        assert _text(items[index]) == f"About Question {index}"
    submitted = [r.json["requests"] for r in fake_upstream.requests if r.json and "requests" in r.json]
    assert [len(requests) for requests in submitted] == [6, 5, 4]  # each time without the refused one
    assert [r["max_tokens"] for r in submitted[-1]] == [50, 50, 50, 50]
    assert UsageRecord.objects.filter(path="batch").count() == 4  # the refused items ran nowhere
    batch.refresh_from_db()
    assert batch.status == "done"


def test_retry_leaves_items_refused_for_their_own_input_and_sends_the_others(
    actors: Actors,
    workers_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    running_batch: Callable[..., Batch],
) -> None:
    queue = StrictQueue()
    fake_upstream.script(*[computed(queue.reply)] * 10)
    batch = running_batch(workers_connection, [*prompts(2, max_tokens=50), *prompts(1, max_tokens=500)])
    _run(batch)
    batch.items.filter(index=0).update(state=ItemState.FAILED, error="The upstream timed out.")

    retried = batch_retry_failed(user=actors.owner, batch_id=batch.pk)

    assert retried == 1
    assert dict(batch.items.values_list("index", "state")) == {
        0: ItemState.PENDING,
        1: ItemState.DONE,
        2: ItemState.FAILED,
    }
    assert batch.items.get(index=2).attempt == 1  # not sent again: it would be refused again


def test_a_chain_started_while_a_replaced_step_holds_the_lease_comes_back_when_it_lapses(
    workers_connection: ProviderConnection, fake_upstream: FakeUpstream, running_batch: Callable[..., Batch]
) -> None:
    # Retry pressed while a step ran: the new chain owns the batch, the old step's lease is live.
    batch = running_batch(workers_connection, prompts(2))
    held_until = timezone.now() + dt.timedelta(seconds=30)
    Batch.objects.filter(pk=batch.pk).update(chain_token="new-chain", lease_until=held_until)

    wait = batch_step_run(batch_id=batch.pk, token="new-chain")

    assert wait is not None and 29 < wait <= 31  # it comes back once the lease has lapsed
    assert batch_step_run(batch_id=batch.pk, token="replaced-chain") is None  # not the owner: it ends
    assert fake_upstream.requests == []  # nothing was sent while the lease was held
    Batch.objects.filter(pk=batch.pk).update(lease_until=timezone.now() - dt.timedelta(seconds=1))
    fake_upstream.script(_queued())
    assert batch_step_run(batch_id=batch.pk, token="new-chain") is not None
    assert len(fake_upstream.requests) == 1  # the owner's step ran once the lease had lapsed
