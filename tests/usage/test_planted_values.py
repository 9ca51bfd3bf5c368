"""Issue 37's planted-values test: a team in `redacted` mode sends 200 known values of each kind
(e-mail addresses, phone and card numbers, IBANs, IPv4 and IPv6 addresses, and secrets of ten
shapes) through chat, compare, batch and gateway requests (in prompts, prompt variables, and
upstream errors that quote them back); none of them is left in what the playground keeps or
sends out: the records, every export format (CSV for spreadsheets and for data tools, JSONL,
XLSX, FOCUS), the OpenTelemetry spans (captured with the SDK's in-memory exporter), the logs,
and the pages that show the records (the request log and each record's page). The upstream
received every one of them as written.

Chat, compare and batch records are made by the metered call each of those features builds
(`usage.calls.kinds`), gateway records by the live gateway.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import logging
import zipfile
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import phonenumbers
import pytest
from django.conf import LazySettings
from django.urls import reverse
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from playground.accounts.models import StoreMode
from playground.lib.redaction import luhn_valid
from playground.providers.adapters import ChatRequest, adapter_for
from playground.providers.models import ProviderConnection
from playground.usage import telemetry
from playground.usage.calls.call import MeteredCall
from playground.usage.calls.kinds import batch_context, batch_item_call, chat_turn_call, compare_column_call
from playground.usage.calls.settlement import Alone
from playground.usage.models import TEAM_STORE_MODE, UsageRecord
from playground.usage.sources import BATCH_ITEM, source_string
from tests.fakes.upstream import FakeUpstream, error, v4_error
from tests.gateway.conftest import KIMI, issue, records_written
from tests.support.actors import Actors
from tests.support.analytics import body
from tests.support.browser import LiveApp
from tests.support.clients import client_for

EACH = 200  # values planted of each kind, as the issue asks
PER_REQUEST = 40  # 1,400 values in 35 requests: the test takes seconds, not minutes
FAILING_EVERY = 5  # every 5th request's upstream answers an error quoting what it was sent
OTEL_ENDPOINT = "http://otel.invalid"


def _card(i: int) -> str:
    digits = f"4{i:014d}"
    check = next(d for d in "0123456789" if luhn_valid(digits + d))
    number = digits + check
    return " ".join(number[n : n + 4] for n in range(0, 16, 4))


def _iban(i: int) -> str:
    bban = f"37040044{i:010d}"
    check = 98 - int(bban + "131400") % 97  # D=13, E=14, then "00"
    compact = f"DE{check:02d}{bban}"
    return " ".join(compact[n : n + 4] for n in range(0, len(compact), 4))


def _secret(i: int) -> str:
    """A secret of one of ten shapes: what is planted is `_written(secret)`."""
    token = hashlib.sha256(str(i).encode()).hexdigest()
    shapes = (
        f"sk-proj-{token[:32]}",  # OpenAI
        f"pgk_{token[:40]}",  # this playground's keys
        f"AKIA{token[:16].upper()}",  # AWS
        f"ghp_{token[:36]}",  # GitHub
        f"hf_{token[:34]}",  # Hugging Face
        f"sk_live_{token[:24]}",  # Stripe
        f"xoxb-{token[:12]}-{token[12:36]}",  # Slack
        f"glpat-{token[:20]}",  # GitLab
        f"bearer{token[:40]}",  # a bearer token (written after "Authorization: Bearer")
        f"MIIE{token}{token[:20]}",  # a private key block's body
    )
    return shapes[i % len(shapes)]


def _written(value: str) -> str:
    """How a value is written in a prompt: a bearer token after its header, a key's body in its block."""
    if value.startswith("bearer"):
        return f"Authorization: Bearer {value}"
    if value.startswith("MIIE"):
        return f"-----BEGIN PRIVATE KEY-----\n{value}\n-----END PRIVATE KEY-----"
    return value


PLANTED: dict[str, list[str]] = {
    "email": [f"planted.{i}.person@example{i}.org" for i in range(EACH)],
    "phone": [f"+44 20 7946 {i:04d}" if i % 2 else f"(212) 555-{1000 + i:04d}" for i in range(EACH)],
    "card": [_card(i + 1) for i in range(EACH)],
    "iban": [_iban(i + 1) for i in range(EACH)],
    "ipv4": [f"10.{i}.{(i * 7) % 250}.{i + 3}" for i in range(EACH)],
    "ipv6": [f"2001:db8:{i + 1:x}::{(i + 1) * 17:x}" for i in range(EACH)],
    "secret": [_secret(i) for i in range(EACH)],
}
COUNTED_AS = {"ipv4": "ip", "ipv6": "ip"}


def _forms(value: str) -> set[str]:
    """The value as planted and as a search for it would also find it (no spaces)."""
    return {value, value.replace(" ", "")}


def _prompts() -> Iterator[list[str]]:
    """The planted values in groups of PER_REQUEST, every kind spread over the requests."""
    values = [value for group in itertools.zip_longest(*PLANTED.values()) for value in group if value]
    for start in range(0, len(values), PER_REQUEST):
        yield values[start : start + PER_REQUEST]


def _text(values: list[str]) -> str:
    return " ".join(f"Note {n}: {_written(value)} is on file." for n, value in enumerate(values))


def _request(values: list[str], *, stream: bool) -> ChatRequest:
    half = len(values) // 2
    return ChatRequest(
        model=KIMI,
        messages=[
            {"role": "system", "content": f"The customer record reads: {_text(values[:half])}"},
            # The last one as a prompt variable's value, filled in: the record keeps it twice.
            {
                "role": "user",
                "content": f"Please check {_text(values[half:-1])} Account {_written(values[-1])}.",
            },
        ],
        max_tokens=20,
        stream=stream,
        variables={"account": _written(values[-1])},
    )


def _failing(upstream: FakeUpstream, values: list[str]) -> None:
    upstream.script(error(400, v4_error(5006, f"Bad input: could not process {_text(values)}")))


def _feature_call(
    index: int, values: list[str], actors: Actors, connection: ProviderConnection
) -> MeteredCall:
    """The call chat, Compare or a batch would make, by turns."""
    adapter = adapter_for(connection)
    kind = index % 3
    if kind == 2:
        context = batch_context(
            team_id=actors.team.pk,
            user_id=actors.owner.pk,
            connection_id=connection.pk,
            model_id=KIMI,
            preset_version_id=None,
            priced_on=None,
            source=source_string(BATCH_ITEM, index, 1),
        )
        return batch_item_call(
            adapter=adapter,
            request=_request(values, stream=False),
            context=context,
            context_window=None,
            keep=lambda record, outcome: None,
            held_by_caller=False,
        )
    common: dict[str, Any] = {
        "adapter": adapter,
        "request": _request(values, stream=True),
        "context_window": None,
        "team_id": actors.team.pk,
        "user_id": actors.owner.pk,
        "connection_id": connection.pk,
        "model_id": KIMI,
        "preset_version_id": None,
    }
    if kind == 1:
        call = compare_column_call(**common, column_id=index, attempt=1)
    else:
        call = chat_turn_call(**common, conversation_id=index)
    call.settlement = Alone(lambda record, outcome: None)
    return call


def _exports(actors: Actors) -> dict[str, str]:
    owner = client_for(actors.owner)
    query = {"team": str(actors.team.pk), "range": "24h"}
    files = {
        "csv for spreadsheets": body(owner.get(reverse("analytics:export", args=["csv"]), query)),
        "csv for data tools": body(
            owner.get(reverse("analytics:export", args=["csv"]), {**query, "flavour": "data"})
        ),
        "jsonl": body(owner.get(reverse("analytics:export", args=["jsonl"]), query)),
        "focus": body(owner.get(reverse("analytics:focus-export"), query)),
    }
    texts = {name: data.decode("utf-8-sig") for name, data in files.items()}
    xlsx = body(owner.get(reverse("analytics:export", args=["xlsx"]), query))
    with zipfile.ZipFile(io.BytesIO(xlsx)) as archive:
        texts["xlsx"] = "".join(archive.read(name).decode() for name in archive.namelist())
    return texts


def _pages(actors: Actors, records: list[UsageRecord]) -> dict[str, str]:
    """The request log and every record's page, as the team's owner reads them."""
    owner = client_for(actors.owner)
    log = owner.get(reverse("analytics:log"), {"team": str(actors.team.pk), "range": "24h"})
    shown = [owner.get(reverse("analytics:record-detail", args=[record.request_id])) for record in records]
    assert log.status_code == 200 and {page.status_code for page in shown} == {200}
    assert all(str(record.request_id) in log.content.decode() for record in records)  # one page holds them
    return {
        "log page": log.content.decode(),
        "record pages": "".join(page.content.decode() for page in shown),
    }


def _kept(records: list[UsageRecord]) -> str:
    """Every text a record keeps, as stored."""
    return json.dumps(
        [
            [record.request_body, record.variables, record.error_text, record.schema_errors, record.metadata]
            for record in records
        ],
        ensure_ascii=False,
    )


@pytest.mark.timeout(120)
def test_no_planted_value_is_kept_exported_spanned_or_logged(
    live_app: LiveApp,
    actors: Actors,
    workers_connection: ProviderConnection,
    fake_upstream: FakeUpstream,
    settings: LazySettings,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    monkeypatch.setitem(telemetry._providers, OTEL_ENDPOINT, provider)
    settings.OTEL_EXPORTER_OTLP_ENDPOINT = OTEL_ENDPOINT
    actors.team.store_mode = StoreMode.REDACTED
    actors.team.save()
    key = issue(actors, workers_connection, store_mode=TEAM_STORE_MODE)  # the team's mode
    for value in PLANTED["phone"]:
        assert phonenumbers.is_valid_number(phonenumbers.parse(value, "US")), value

    groups = list(_prompts())
    for index, values in enumerate(groups):
        if index % FAILING_EVERY == FAILING_EVERY - 1:
            _failing(fake_upstream, values)
        if index % 4 == 3:  # a gateway request
            request = _request(values, stream=False)
            sent = {"model": KIMI, "messages": request.messages, "max_tokens": 20}
            httpx.post(live_app.url + "/v1/chat/completions", json=sent, headers=key.headers, timeout=10)
            records_written(index + 1)  # SQLite has one writer: the gateway's record first
        else:
            _feature_call(index, values, actors, workers_connection).run()

    records = records_written(len(groups))
    assert len(records) == len(groups)
    assert {record.path for record in records} == {"chat", "compare", "batch", "gateway"}
    assert {record.store_mode for record in records} == {StoreMode.REDACTED}
    failed = [record for record in records if record.error_text]
    assert len(failed) >= len(groups) // FAILING_EVERY and all("<" in record.error_text for record in failed)
    counted = Counter[str]()
    for record in records:
        counted.update(record.redactions or {})
    for kind, values in PLANTED.items():
        # The adapters' own guard replaces "sk-" keys with "[redacted]" in every mode, before this.
        found_before = sum(value.startswith("sk-") for value in values)
        assert counted[COUNTED_AS.get(kind, kind)] >= len(values) - found_before, (kind, counted)

    upstream = json.dumps([request.json for request in fake_upstream.requests], ensure_ascii=False)
    places = {
        "records": _kept(records),
        **_exports(actors),
        **_pages(actors, records),
        "spans": "",
        "logs": caplog.text,
    }
    assert provider.force_flush()
    places["spans"] = "\n".join(span.to_json() for span in spans.get_finished_spans())
    assert len(spans.get_finished_spans()) == len(records)
    found = {
        (kind, value, place)
        for kind, values in PLANTED.items()
        for value in values
        for place, text in places.items()
        if any(form in text for form in _forms(value))
    }
    missing_upstream = [value for values in PLANTED.values() for value in values if value not in upstream]

    assert missing_upstream == []  # what went to the model is as the caller wrote it
    assert sorted(found) == [], f"{len(found)} planted values found"
    planted = sum(len(values) for values in PLANTED.values())
    assert planted == EACH * len(PLANTED) == 1400
    print(f"planted values: {planted} in {len(records)} records, 0 found in {', '.join(places)}")
