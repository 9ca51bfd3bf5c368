"""Batch pages: submit with line errors (nothing stored), preview, team scoping, streamed results."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from playground.batches.models import Batch, BatchItem, ItemState
from playground.batches.selectors import batch_progress
from playground.batches.services.actions import batch_confirm, batch_retry_failed
from playground.batches.services.step import batch_step_run
from playground.batches.views import csv_safe
from playground.catalog.models import CatalogModel, PriceCard
from playground.chat.models import Conversation
from playground.providers.models import ProviderConnection
from playground.providers.services import connection_models_store
from playground.usage.budgets import BUDGET_EXCEEDED, budget_month
from playground.usage.models import BudgetLedger, TeamBudget, UsageRecord
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.batches import NO_QUEUE_MODEL, jsonl, prompts
from tests.support.clients import client_for

if TYPE_CHECKING:
    from tests.support.clients import TestResponse

pytestmark = pytest.mark.django_db


def _post(
    client: Client, connection: ProviderConnection, text: str, *, model: str = NO_QUEUE_MODEL, **extra: str
) -> TestResponse:
    data = {
        "connection": connection.pk,
        "model_id": model,
        "input_kind": "jsonl",
        "text": text,
        **extra,
    }
    return client.post(reverse("batches:batch-list"), data)


def test_a_bad_line_is_refused_with_its_number_and_nothing_is_stored(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    text = jsonl(prompts(2)) + "{oops\n"

    response = _post(client_for(actors.owner), workers_connection, text)

    assert response.status_code == 400
    assert "Line 3: not valid JSON" in response.content.decode()
    assert "nothing was queued" in response.content.decode()
    assert not Batch.objects.exists() and not BatchItem.objects.exists()


def test_a_model_the_connection_does_not_serve_is_refused_at_the_preview(
    actors: Actors, openai_connection: ProviderConnection
) -> None:
    """Not item by item after Confirm: the connection's last test listed what it serves."""
    connection_models_store(connection=openai_connection, models=["served/a", "served/b"])

    response = _post(client_for(actors.owner), openai_connection, jsonl(prompts(2)), model="served/z")

    assert response.status_code == 400
    assert "does not serve served/z" in response.content.decode()
    assert not Batch.objects.exists()
    assert (
        _post(client_for(actors.owner), openai_connection, jsonl(prompts(2)), model="served/a").status_code
        == 302
    )


def test_a_valid_input_becomes_a_draft_with_a_preview_and_an_estimate(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    client = client_for(actors.owner)
    response = _post(client, workers_connection, jsonl(prompts(3, max_tokens=10)))
    batch = Batch.objects.get()
    page = client.get(reverse("batches:batch-detail", args=[batch.pk])).content.decode()

    assert response.status_code == 302
    assert batch.status == "draft" and batch.items.count() == 3
    assert "Question 0" in page and "Confirm and run 3 items" in page
    assert "does not take Workers AI&#x27;s batch queue" in page
    assert batch.estimate["output_tokens"] == 30 and batch.estimate["cost"] is not None


def _draft_of_forty(client: Client, connection: ProviderConnection) -> Batch:
    """A draft whose worst case is tens of cents (a budget limit is whole cents)."""
    _post(client, connection, jsonl(prompts(40, max_tokens=4000)))
    return Batch.objects.get()


def test_the_preview_says_when_the_budget_cannot_run_the_batch_or_only_part_of_it(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    client = client_for(actors.owner)
    batch = _draft_of_forty(client, workers_connection)
    worst = Decimal(batch.estimate["cost"])
    url = reverse("batches:batch-detail", args=[batch.pk])
    budget = TeamBudget.objects.create(team=actors.team, monthly_limit_usd=worst * 10)
    assert 'id="budget-fit"' not in client.get(url).content.decode()

    # Room for about half of the items (a limit is whole cents): Confirm stays, with what will happen.
    budget.monthly_limit_usd = (worst / 2).quantize(Decimal("0.01"))
    budget.save()
    page = client.get(url).content.decode()
    fit = int(budget.monthly_limit_usd / (worst / 40))
    assert 15 <= fit <= 25
    assert f"about {fit} of its 40 items would run before the rest are refused for budget" in page
    assert "Confirm and run 40 items" in page

    # Spent: not one item fits. No Confirm, the reason instead; a forced confirm is refused too.
    BudgetLedger.objects.create(
        team=actors.team, month=budget_month(actors.team), spent_usd=budget.monthly_limit_usd
    )
    page = client.get(url).content.decode()
    assert "This batch cannot run now: $0.00 of the team&#x27;s" in page
    assert "Confirm and run" not in page
    refused = client.post(reverse("batches:batch-action", args=[batch.pk, "confirm"]))
    assert refused.status_code == 400 and "This batch cannot run now" in refused.content.decode()
    batch.refresh_from_db()
    assert batch.status == "draft"


def test_items_the_budget_refused_are_retried_only_once_it_covers_them_again(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    client = client_for(actors.owner)
    batch = _draft_of_forty(client, workers_connection)
    budget = TeamBudget.objects.create(team=actors.team, monthly_limit_usd=Decimal(1))
    batch_confirm(user=actors.owner, batch_id=batch.pk)
    batch.items.update(state=ItemState.FAILED, error="Over budget.", error_code=BUDGET_EXCEEDED)
    Batch.objects.filter(pk=batch.pk).update(finished_at=timezone.now())
    BudgetLedger.objects.create(team=actors.team, month=budget_month(actors.team), spent_usd=Decimal(1))
    batch.refresh_from_db()

    progress = batch_progress(batch=batch)
    assert (progress.budget_refused, progress.budget_blocked, progress.retryable) == (40, True, 0)
    page = client.get(reverse("batches:batch-detail", args=[batch.pk])).content.decode()
    assert "40 items were refused by the budget. It still cannot cover one item" in page
    assert "Retry 40 failed" not in page
    assert batch_retry_failed(user=actors.owner, batch_id=batch.pk) == 0

    budget.monthly_limit_usd = Decimal(5)
    budget.save()
    page = client.get(reverse("batches:batch-detail", args=[batch.pk])).content.decode()
    assert "The budget has room again: Retry sends them." in page and "Retry 40 failed" in page


def test_an_outsider_gets_404_and_a_viewer_cannot_run(
    actors: Actors, openai_connection: ProviderConnection, running_batch: Callable[..., Batch]
) -> None:
    batch = running_batch(openai_connection, prompts(1))
    for name in ("batch-detail",):
        assert client_for(actors.outsider).get(reverse(f"batches:{name}", args=[batch.pk])).status_code == 404
    assert (
        client_for(actors.outsider)
        .get(reverse("batches:batch-results", args=[batch.pk, "jsonl"]))
        .status_code
        == 404
    )
    assert (
        client_for(actors.outsider)
        .post(reverse("batches:batch-action", args=[batch.pk, "cancel"]))
        .status_code
        == 404
    )

    assert client_for(actors.viewer).get(reverse("batches:batch-detail", args=[batch.pk])).status_code == 200
    assert (
        client_for(actors.viewer).post(reverse("batches:batch-action", args=[batch.pk, "cancel"])).status_code
        == 403
    )
    batch.refresh_from_db()
    assert batch.status == "running"


def test_an_item_named_by_its_id_redirects_to_its_page_for_the_team_only(
    actors: Actors, openai_connection: ProviderConnection, running_batch: Callable[..., Batch]
) -> None:
    batch = running_batch(openai_connection, prompts(2))
    item = batch.items.get(index=1)
    url = reverse("batches:item-detail", args=[item.pk])

    response = client_for(actors.viewer).get(url)

    assert response.status_code == 302
    assert response["Location"] == reverse("batches:batch-item", args=[batch.pk, 1])
    assert client_for(actors.outsider).get(url).status_code == 404


def test_results_stream_in_input_order_as_jsonl_and_formula_safe_csv(
    actors: Actors, openai_connection: ProviderConnection, running_batch: Callable[..., Batch]
) -> None:
    batch = running_batch(
        openai_connection, [{"messages": [{"role": "user", "content": "=HYPERLINK(1)"}]}, *prompts(2)]
    )
    record = UsageRecord.objects.create(
        team=actors.team, model_id="m", status="ok", prompt_tokens=5, completion_tokens=2
    )
    BatchItem.objects.filter(batch=batch, index=1).update(
        state=ItemState.DONE, response={"text": "+1 answer"}, usage_record=record
    )
    client = client_for(actors.teammate)

    response = client.get(reverse("batches:batch-results", args=[batch.pk, "jsonl"]))
    lines = [json.loads(line) for line in _body(response).splitlines()]
    csv_response = client.get(reverse("batches:batch-results", args=[batch.pk, "csv"]))
    rows = list(csv.DictReader(io.StringIO(_body(csv_response))))

    assert response.streaming and csv_response.streaming
    assert [line["index"] for line in lines] == [0, 1, 2]
    assert lines[1]["output"]["text"] == "+1 answer" and lines[1]["usage"]["prompt_tokens"] == 5
    assert lines[0]["input"]["messages"][0]["content"] == "=HYPERLINK(1)"
    assert rows[0]["prompt"] == "'=HYPERLINK(1)"
    assert rows[1]["output"] == "'+1 answer" and rows[1]["prompt_tokens"] == "5"


def _body(response: Any) -> str:
    async def read() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(read)().decode()


def test_csv_safe_quotes_every_formula_start() -> None:
    assert [csv_safe(v) for v in ("=1", "+1", "-1", "@x", "\tx", "ok", 5)] == [
        "'=1",
        "'+1",
        "'-1",
        "'@x",
        "'\tx",
        "ok",
        5,
    ]


def test_the_progress_poll_reloads_the_page_once_the_batch_is_finished(
    actors: Actors, openai_connection: ProviderConnection, running_batch: Callable[..., Batch]
) -> None:
    batch = running_batch(openai_connection, prompts(1))
    url = reverse("batches:batch-progress", args=[batch.pk])
    client = client_for(actors.owner)

    page = client.get(reverse("batches:batch-detail", args=[batch.pk])).content.decode()
    running = client.post(url, headers={"HX-Request": "true"})
    Batch.objects.filter(pk=batch.pk).update(finished_at=timezone.now(), status="done")
    finished = client.post(url, headers={"HX-Request": "true"})

    assert f'hx-post="{url}" hx-trigger="every 2s"' in page
    assert 'id="progress"' in running.content.decode() and 'hx-trigger="every 2s"' in running.content.decode()
    assert finished.headers["HX-Refresh"] == "true"


def _stall(batch: Batch) -> None:
    """The batch's chain died: its lease, due step and last heartbeat are long past the grace."""
    long_ago = timezone.now() - dt.timedelta(hours=1)
    Batch.objects.filter(pk=batch.pk).update(lease_until=None, next_step_at=long_ago, heartbeat_at=long_ago)


def test_opening_a_stalled_batch_starts_no_chain_but_its_progress_poll_takes_it_over(
    actors: Actors, openai_connection: ProviderConnection, running_batch: Callable[..., Batch]
) -> None:
    batch = running_batch(openai_connection, prompts(1))
    _stall(batch)
    dead_chain = Batch.objects.get(pk=batch.pk).chain_token

    page = client_for(actors.viewer).get(reverse("batches:batch-detail", args=[batch.pk]))
    after_get = Batch.objects.get(pk=batch.pk)
    poll = client_for(actors.viewer).post(reverse("batches:batch-progress", args=[batch.pk]))
    after_poll = Batch.objects.get(pk=batch.pk)

    assert page.status_code == 200 and poll.status_code == 200
    assert after_get.next_step_at is not None
    assert after_get.chain_token == dead_chain and after_get.next_step_at < timezone.now()
    assert after_poll.chain_token != dead_chain and after_poll.next_step_at is not None
    assert after_poll.next_step_at > after_get.next_step_at


def test_the_progress_poll_leaves_a_live_chain_alone_and_is_404_to_an_outsider(
    actors: Actors, openai_connection: ProviderConnection, running_batch: Callable[..., Batch]
) -> None:
    batch = running_batch(openai_connection, prompts(1))
    url = reverse("batches:batch-progress", args=[batch.pk])
    chain = Batch.objects.get(pk=batch.pk).chain_token

    client_for(actors.owner).post(url)
    outsider = client_for(actors.outsider).post(url)
    _stall(batch)
    stalled = client_for(actors.outsider).post(url)

    assert chain and Batch.objects.get(pk=batch.pk).chain_token == chain
    assert outsider.status_code == 404 and stalled.status_code == 404
    assert client_for(actors.owner).get(url).status_code == 405


def test_a_batch_started_from_a_conversation_carries_its_settings(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    conversation = Conversation.objects.create(
        team=actors.team, user=actors.owner, model_id=NO_QUEUE_MODEL, system_prompt="Answer in French."
    )

    response = _post(
        client_for(actors.owner), workers_connection, jsonl(prompts(1)), conversation=str(conversation.pk)
    )

    assert response.status_code == 302
    batch = Batch.objects.get()
    assert batch.from_conversation_id == conversation.pk  # what it carries: tests/batches/test_drafts.py
    assert batch.items.get().request["messages"][0] == {"role": "system", "content": "Answer in French."}


def test_the_conversation_pages_batch_link_opens_the_form_with_that_conversation_chosen(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    conversation = Conversation.objects.create(
        team=actors.team, user=actors.owner, connection=workers_connection, model_id=NO_QUEUE_MODEL
    )
    owner = client_for(actors.owner)

    page = owner.get(reverse("chat:conversation-detail", args=[conversation.pk])).content.decode()
    form = owner.get(reverse("batches:batch-list"), {"conversation": conversation.pk}).content.decode()

    assert f'href="{reverse("batches:batch-list")}?conversation={conversation.pk}#new"' in page
    assert f'<option value="{conversation.pk}" selected>' in form


def test_another_teams_conversation_cannot_seed_a_batch(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    foreign = Conversation.objects.create(
        team=actors.other_team, user=actors.outsider, model_id=NO_QUEUE_MODEL
    )

    response = _post(
        client_for(actors.owner), workers_connection, jsonl(prompts(1)), conversation=str(foreign.pk)
    )

    assert response.status_code == 400
    assert not Batch.objects.exists()


def _override(actors: Actors, model_id: str, **dates: Any) -> PriceCard:
    """A negotiated rate of the team: far below the list price, so a wrong card shows."""
    model = CatalogModel.objects.get(model_id=model_id)
    return PriceCard.objects.create(
        model=model,
        team=actors.team,
        effective_from=dates.get("effective_from", timezone.now().date() - dt.timedelta(days=30)),
        effective_until=dates.get("effective_until"),
        input_per_m=Decimal("0.010000"),
        cached_input_per_m=Decimal("0.001000"),
        output_per_m=Decimal("0.020000"),
        label="Alpha's negotiated rate",
    )


def test_the_estimate_prices_by_the_teams_override_and_names_it_the_card_that_then_prices_the_items(
    actors: Actors,
    openai_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    running_batch: Callable[..., Batch],
) -> None:
    override = _override(actors, NO_QUEUE_MODEL)
    client = client_for(actors.owner)
    _post(client, openai_connection, jsonl(prompts(4, max_tokens=100)))
    draft = Batch.objects.get()
    page = client.get(reverse("batches:batch-detail", args=[draft.pk])).content.decode()

    estimate = draft.estimate
    # 4 prompts of 10 characters (each 3 tokens by the meter's rule: 40 / 4 rounded up, line by
    # line, as each item is estimated) and 4 x 100 output tokens.
    assert (estimate["prompt_tokens"], estimate["output_tokens"]) == (12, 400)
    assert not estimate["prompt_counted"]  # NO_QUEUE_MODEL is no OpenAI model: no tokenizer
    assert Decimal(estimate["cost"]) == (12 * Decimal("0.01") + 400 * Decimal("0.02")) / 1_000_000
    assert estimate["price_card"] == "Alpha's negotiated rate" and estimate["price_card_override"]
    assert estimate["priced_on"] == str(timezone.now().date())
    assert "Alpha&#x27;s negotiated rate" in page and "Alpha's override" in page
    assert f"the card in force on {timezone.now().date()}" in page

    batch = batch_confirm(user=actors.owner, batch_id=draft.pk)
    for _ in range(5):
        batch.refresh_from_db()
        if batch_step_run(batch_id=batch.pk, token=batch.chain_token) is None:
            break
    assert {record.price_card_id for record in UsageRecord.objects.filter(path="batch")} == {override.pk}


def test_an_override_that_has_ended_does_not_price_the_estimate(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    _override(actors, NO_QUEUE_MODEL, effective_until=timezone.now().date() - dt.timedelta(days=1))

    _post(client_for(actors.owner), workers_connection, jsonl(prompts(1)))

    estimate = Batch.objects.get().estimate
    assert estimate["price_card"] == "Workers AI list price for qwen3-30b-a3b-fp8 ($0.051 in / $0.335 out)"
    assert not estimate["price_card_override"]


def test_a_draft_that_waits_past_a_price_change_shows_the_card_it_would_be_priced_by_today(
    actors: Actors, workers_connection: ProviderConnection
) -> None:
    client = client_for(actors.owner)
    _post(client, workers_connection, jsonl(prompts(1)))
    draft = Batch.objects.get()
    _override(actors, NO_QUEUE_MODEL, effective_from=timezone.now().date())

    page = client.get(reverse("batches:batch-detail", args=[draft.pk])).content.decode()

    assert "Alpha&#x27;s negotiated rate" in page
    assert "Workers AI list price" not in page
