"""The batch preview counts each line with the model's tokenizer and refuses, by its number, a
line that cannot fit the window the engine really serves (the real engine: 2,048 tokens, where
the catalogue says 8,192)."""

from __future__ import annotations

import httpx
import pytest
from django.urls import reverse

from playground.batches.models import Batch, BatchItem
from playground.catalog.seed import ENGINE_MODEL_ID
from playground.providers.models import ProviderConnection
from tests.support.actors import Actors
from tests.support.batches import jsonl
from tests.support.clients import client_for
from tests.support.engine import EngineProcess

pytestmark = pytest.mark.django_db

LONG = "lorem " * 1300  # 2,600 tokens for SmolLM2 (two a word); 1,950 by the characters ÷ 4 estimate


def line(text: str, **extra: object) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": text}], **extra}


def preview(actors: Actors, connection: ProviderConnection, rows: list[dict[str, object]]) -> str:
    data = {
        "connection": connection.pk,
        "model_id": ENGINE_MODEL_ID,
        "input_kind": "jsonl",
        "text": jsonl(rows),
    }
    return client_for(actors.owner).post(reverse("batches:batch-list"), data).content.decode()


def engine_count(engine: EngineProcess, rows: list[dict[str, object]]) -> list[int]:
    response = httpx.post(
        f"{engine.url}/engine/v1/tokenize",
        headers=engine.headers,
        json={"model": ENGINE_MODEL_ID, "requests": rows},
        timeout=30,
    )
    return [row["prompt_tokens"] for row in response.json()["requests"]]


def test_an_over_long_line_is_refused_at_the_preview_by_its_number(
    actors: Actors, served_engine: ProviderConnection, running_engine: EngineProcess
) -> None:
    rows = [line("Hi"), line(LONG), line("lorem " * 800, max_tokens=1500)]
    long_tokens, with_answer = engine_count(running_engine, rows[1:])

    html = preview(actors, served_engine, rows)

    assert (
        f"Line 2: The prompt is {long_tokens:,} tokens (counted), but the model&#x27;s context window is "
        "2,048 tokens (as served): shorten it." in html
    )
    assert (
        f"Line 3: The prompt is {with_answer:,} tokens (counted) and max_tokens asks for 1,500 more, but "
        "the model&#x27;s context window is 2,048 tokens (as served): shorten it or lower its max_tokens."
        in html
    )
    assert "Line 1" not in html
    assert not Batch.objects.exists() and not BatchItem.objects.exists()


def test_a_batch_that_fits_is_priced_on_counted_tokens(
    actors: Actors, served_engine: ProviderConnection, running_engine: EngineProcess
) -> None:
    rows = [line("What is the capital of France?"), line("And of Italy?", max_tokens=20)]

    preview(actors, served_engine, rows)

    batch = Batch.objects.get()
    assert batch.estimate["prompt_tokens"] == sum(engine_count(running_engine, rows))
    assert batch.estimate["prompt_counted"] is True
    page = client_for(actors.owner).get(reverse("batches:batch-detail", args=[batch.pk])).content.decode()
    assert "(counted with the model's tokenizer)" in page
