"""Cache writes end to end: an OpenAI-compatible upstream that reports them (LiteLLM's and
OpenRouter's spellings), through the gateway, to the record, its page, the FOCUS export's
`cache_write` row and the span's `gen_ai.usage.cache_creation.input_tokens`."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from decimal import Decimal
from typing import Any

import httpx
from django.http import QueryDict
from django.urls import reverse
from django.utils import timezone

from playground.analytics.filters import filters_from_query
from playground.analytics.selectors.totals import headline
from playground.catalog.models import CatalogModel, PriceCard
from playground.catalog.seed import KIMI_K26
from playground.providers.models import ProviderConnection
from playground.usage.models import UsageRecord
from playground.usage.telemetry import spans_flush
from tests.fakes.otlp import OtlpReceiver
from tests.fakes.upstream import FakeUpstream, chat_completion, json_reply, openai_chunk, sse, usage_chunk
from tests.gateway.conftest import issue, records_written
from tests.support.actors import Actors
from tests.support.browser import LiveApp
from tests.support.clients import client_for
from tests.support.clock import clock

# LiteLLM: OpenAI's prompt_tokens (reads and writes included) beside Anthropic's top-level figures.
LITELLM_USAGE = {
    "prompt_tokens": 3000,
    "completion_tokens": 20,
    "total_tokens": 3020,
    "prompt_tokens_details": {"cached_tokens": 1000},
    "cache_read_input_tokens": 1000,
    "cache_creation_input_tokens": 1500,
}
# OpenRouter: the writes inside prompt_tokens_details.
OPENROUTER_USAGE = {
    "prompt_tokens": 4000,
    "completion_tokens": 10,
    "total_tokens": 4010,
    "prompt_tokens_details": {"cached_tokens": 2500, "cache_write_tokens": 1000},
}


def team_card(actors: Actors) -> PriceCard:
    """A negotiated rate that prices writes above fresh input, as Anthropic's do (1.25x)."""
    return PriceCard.objects.create(
        model=CatalogModel.objects.get(model_id=KIMI_K26),
        team=actors.team,
        effective_from=timezone.now().date(),
        input_per_m=Decimal("0.96"),
        cached_input_per_m=Decimal("0.16"),
        cache_write_input_per_m=Decimal("1.20"),
        output_per_m=Decimal("4.00"),
        label="Negotiated with writes",
    )


def ask(gateway: LiveApp, secret: str, *, stream: bool) -> None:
    body: dict[str, Any] = {
        "model": KIMI_K26,
        "messages": [{"role": "user", "content": "x"}],
        "stream": stream,
    }
    response = httpx.post(
        gateway.url + "/v1/chat/completions",
        json=body,
        headers={"authorization": f"Bearer {secret}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text


def focus_rows(actors: Actors, *, now: dt.datetime) -> list[dict[str, str]]:
    with clock(now):
        response = client_for(actors.owner).get(
            reverse("analytics:focus-export"), {"team": str(actors.team.pk), "range": "24h"}
        )
    assert response.status_code == 200, response.content
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def dashboard_cost(actors: Actors, *, now: dt.datetime) -> Decimal:
    query = QueryDict(mutable=True)
    query.update({"team": str(actors.team.pk), "range": "24h"})
    filters = filters_from_query(user=actors.owner, query=query, now=now)
    assert filters is not None
    return headline(filters).totals.cost


def test_cache_writes_reported_upstream_are_counted_priced_exported_and_sent_as_spans(
    gateway: LiveApp,
    actors: Actors,
    openai_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    otlp_receiver: OtlpReceiver,
) -> None:
    card = team_card(actors)
    key = issue(actors, openai_connection)
    fake_upstream.script(
        json_reply(json.dumps(chat_completion("Hi", usage_body=LITELLM_USAGE))),
        sse([openai_chunk("Hi", finish_reason="stop"), usage_chunk(OPENROUTER_USAGE)]),
    )

    ask(gateway, key.secret, stream=False)
    ask(gateway, key.secret, stream=True)
    litellm, openrouter = records_written(2)

    assert (litellm.prompt_tokens, litellm.cached_tokens, litellm.cache_write_tokens) == (3000, 1000, 1500)
    assert litellm.price_card_id == card.pk
    # 500 fresh x $0.96/M + 1,000 cached x $0.16/M + 1,500 written x $1.20/M + 20 out x $4/M
    assert (litellm.input_cost, litellm.cached_input_cost, litellm.cache_write_cost, litellm.output_cost) == (
        Decimal("0.00048"),
        Decimal("0.00016"),
        Decimal("0.0018"),
        Decimal("0.00008"),
    )
    assert litellm.total_cost == Decimal("0.00252")
    assert (openrouter.cached_tokens, openrouter.cache_write_tokens) == (2500, 1000)
    assert openrouter.cache_write_cost == Decimal("0.0012")
    assert openrouter.total_cost == Decimal("0.00212")  # 500 fresh, 2,500 cached, 1,000 written, 10 out

    now = timezone.now()
    rows = focus_rows(actors, now=now)
    writes = [row for row in rows if row["x_TokenKind"] == "cache_write"]
    assert len(writes) == 1
    assert writes[0]["SkuId"] == f"{KIMI_K26}:cache_write"
    assert writes[0]["SkuMeter"] == "Cache write tokens"
    assert writes[0]["SkuPriceId"] == f"price-card-{card.pk}:cache_write"
    assert Decimal(writes[0]["ConsumedQuantity"]) == 2500
    assert Decimal(writes[0]["BilledCost"]) == Decimal("0.003")
    assert Decimal(writes[0]["ContractedUnitPrice"]) == Decimal("0.0000012")
    fresh = next(row for row in rows if row["x_TokenKind"] == "input")
    assert Decimal(fresh["ConsumedQuantity"]) == 500 + 500  # writes are no longer in the fresh row
    billed = sum(Decimal(row["BilledCost"]) for row in rows)
    assert billed == dashboard_cost(actors, now=now) == litellm.total_cost + openrouter.total_cost

    assert spans_flush(timeout_millis=10_000)
    spans = otlp_receiver.by_record()
    for record in (litellm, openrouter):
        attributes = spans[str(record.request_id)].attributes
        assert attributes["gen_ai.usage.cache_creation.input_tokens"] == record.cache_write_tokens
        assert attributes["gen_ai.usage.cache_read.input_tokens"] == record.cached_tokens
        assert attributes["gen_ai.usage.input_tokens"] == record.prompt_tokens


def test_the_records_page_shows_its_cache_writes_and_their_cost(
    gateway: LiveApp,
    actors: Actors,
    openai_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
) -> None:
    team_card(actors)
    key = issue(actors, openai_connection)
    fake_upstream.script(json_reply(json.dumps(chat_completion("Hi", usage_body=LITELLM_USAGE))))
    ask(gateway, key.secret, stream=False)
    (record,) = records_written(1)

    page = client_for(actors.owner).get(reverse("analytics:record-detail", args=[record.request_id]))

    text = page.content.decode()
    assert page.status_code == 200
    assert "Cache-write tokens</dt><dd>1500" in text
    assert "(3,000 prompt - 1,000 cached - 1,500 written)" in text
    line = '<td>Cache write</td><td class="formula-tokens">1,500 written</td><td class="num">1.200000</td>'
    assert f'{line}<td class="num">0.0018000000</td>' in text


def test_a_record_without_cache_writes_shows_no_cache_write_line(
    gateway: LiveApp,
    actors: Actors,
    openai_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
) -> None:
    key = issue(actors, openai_connection)
    workers_like = {
        "prompt_tokens": 100,
        "completion_tokens": 2,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    fake_upstream.script(json_reply(json.dumps(chat_completion("Hi", usage_body=workers_like))))
    ask(gateway, key.secret, stream=False)
    (record,) = records_written(1)

    page = client_for(actors.owner).get(reverse("analytics:record-detail", args=[record.request_id]))

    assert record.cache_write_tokens is None and record.cache_write_cost == 0
    assert UsageRecord.objects.filter(cache_write_tokens__isnull=False).count() == 0
    assert "Cache write" not in page.content.decode() and "Cache-write" not in page.content.decode()
