"""Batch drafts: every input line checked, the items stored, the path chosen and the cost estimated.

Each line's prompt is counted as the pre-flight counts a chat turn (`usage.token_count`: the
model's tokenizer where one is known, else estimated), a chunk of lines at a time, and a line
whose prompt and `max_tokens` cannot fit the model's context window on the connection is
refused at the preview, by its line number, like any other bad line.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from itertools import batched
from typing import IO, TypedDict

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from playground.batches.inputs import InputRules, ItemInput, LineError, Shared, csv_items, jsonl_items
from playground.batches.models import Batch, BatchItem, BatchPath, BatchStatus, InputKind
from playground.batches.services.metered_item import draft_context
from playground.catalog.selectors import catalog_model_serving
from playground.presets.request_presets import RequestPreset, preset_source_setup
from playground.presets.selectors import preset_version_setup
from playground.presets.services import connection_ref, preset_version_reuse_or_save
from playground.presets.setup import PresetSetup
from playground.providers.connection_check import connection_model_check
from playground.providers.context_windows import ContextWindow, context_window_for
from playground.providers.kinds import ConnectionKind
from playground.providers.models import ProviderConnection
from playground.providers.request_rules import request_capabilities
from playground.providers.selectors import connection_for_run
from playground.usage.budgets.worst_case import request_max_tokens_asked
from playground.usage.calls.context import RequestContext
from playground.usage.estimates import cost_estimate
from playground.usage.records import request_price_card
from playground.usage.sources import CONVERSATION
from playground.usage.token_count import prompt_tokens_counts, window_overrun

MAX_REPORTED_ERRORS = 50
PREVIEW_ROWS = 5
INSERT_CHUNK = 1_000
COUNT_CHUNK = 500  # lines counted together (one tokenize call to the engine per 200 of them)


class PreviewRow(TypedDict):
    """One of the first items, as the draft's page shows it (stored in `Batch.preview`)."""

    line: int
    external_reference: str
    messages: int  # how many
    prompt: str  # the last message's text, cut at 300 characters
    options: str  # "temperature=0.2, max_tokens=50"
    tools: int  # how many
    response_format: str  # its type, "" without one


class BatchEstimate(TypedDict):
    """The pre-flight estimate (stored in `Batch.estimate`). Money as strings, to keep JSON exact."""

    prompt_tokens: int
    prompt_counted: bool  # every line's prompt counted by the model's tokenizer; False: estimated
    output_tokens: int
    cache_share: str
    cost: str | None  # None when no price card prices the model
    cost_with_cache: str | None
    price_card: str
    price_card_override: bool
    priced_on: str  # ISO date
    output_assumption: int  # output tokens counted for an item without max_tokens


class BatchInputInvalid(Exception):
    """The input has bad lines: nothing was stored. `errors` holds the first ones, in line order."""

    def __init__(self, errors: list[LineError], error_count: int) -> None:
        super().__init__(f"{error_count} bad line(s)")
        self.errors = errors
        self.error_count = error_count


@dataclass(frozen=True)
class BatchInput:
    kind: str  # InputKind
    stream: IO[bytes]  # seekable: read once to check, once to store
    template: str = ""  # CSV only
    shared: Shared = field(default_factory=Shared)


@dataclass
class _Tally:
    count: int = 0
    prompt_tokens: int = 0
    prompt_counted: bool = True
    output_tokens: int = 0
    error_count: int = 0

    def __post_init__(self) -> None:
        self.errors: list[LineError] = []
        self.preview: list[PreviewRow] = []


def batch_draft_create(
    *,
    user: User,
    connection_id: int,
    model_id: str,
    source: BatchInput,
    name: str = "",
    from_conversation_id: int | None = None,
    preset_version_id: int | None = None,
) -> Batch:
    """Check every line, then store the items as a draft (nothing runs until it is confirmed).

    Configured by a preset version (`preset_version_id`, one of the user's teams'), or started
    from a conversation (`from_conversation_id`), whose settings are saved as a version then (or
    an identical version reused: `preset_version_reuse_or_save`): one way either way. The
    version's connection and model run the batch instead of those given (a conversation whose
    connection was deleted runs on the one given), and its settings go with every item (see
    `_with_preset`). Raises `ValidationError` (conversation, version, connection, a model the
    connection does not serve when it lists its models),
    `PermissionDenied` (viewers) or `BatchInputInvalid` with the bad lines; in every error case
    nothing is stored, no version either.
    """
    setup = _setup_for(user, from_conversation_id, preset_version_id)
    if setup is not None:  # its connection and model run the batch
        connection_id, model_id = setup.connection.id or connection_id, setup.model_id
    connection, model_id = connection_for_run(user=user, connection_id=connection_id, model_id=model_id)
    connection_model_check(connection=connection, model_id=model_id)  # at the preview, not item by item
    if setup is not None and setup.connection.id is None:
        setup = dataclasses.replace(setup, connection=connection_ref(connection))
    shared = _with_preset(source.shared, setup.request_preset() if setup else None, connection)
    today = timezone.now().date()
    caps = request_capabilities(connection=connection, model_id=model_id, day=today)

    def rules() -> InputRules:
        return InputRules(parameters=connection.spec.parameters, caps=caps, shared=shared)

    window = context_window_for(connection=connection, model_id=model_id, day=today)
    tally = _check(_read(source, rules()), connection=connection, model_id=model_id, window=window)
    if tally.error_count or not tally.count:
        errors = tally.errors or [LineError(0, "The input has no items.")]
        raise BatchInputInvalid(errors, tally.error_count or 1)
    path, reason = batch_path_for(connection=connection, model_id=model_id, day=today)
    source.stream.seek(0)
    with transaction.atomic():
        if setup is not None and setup.version_id is None:  # a conversation's, saved only now
            preset_version_id = preset_version_reuse_or_save(user=user, setup=setup).pk
        batch = Batch(
            team_id=connection.team_id,
            created_by=user,
            connection=connection,
            model_id=model_id,
            name=name.strip()[:200],
            input_kind=source.kind,
            from_conversation_id=from_conversation_id,
            preset_version_id=preset_version_id,
            path=path,
            path_reason=reason,
            item_count=tally.count,
            preview=tally.preview,
        )
        batch.estimate = batch_estimate(
            context=draft_context(batch, today),
            prompt_tokens=tally.prompt_tokens,
            prompt_counted=tally.prompt_counted,
            output_tokens=tally.output_tokens,
        )
        batch.save()
        _items_store(batch, _read(source, rules()))
    return batch


def _setup_for(user: User, conversation_id: int | None, version_id: int | None) -> PresetSetup | None:
    if conversation_id is not None:
        setup = preset_source_setup(kind=CONVERSATION, user=user, source_id=conversation_id)
        if setup is None:
            raise ValidationError({"conversation": "Choose one of your team's conversations."})
        return setup
    if version_id is None:
        return None
    setup = preset_version_setup(user=user, version_id=version_id)
    if setup is None or setup.connection.id is None:
        raise ValidationError(
            {"preset_version": "Choose a version of one of your team's presets whose connection exists."}
        )
    return setup


def _with_preset(shared: Shared, preset: RequestPreset | None, connection: ProviderConnection) -> Shared:
    """The settings every item carries: the version's parameters that the connection's kind
    takes, its tools and response format, and its system prompt unless one was typed (what the
    caller set wins; a line's own settings win over all of them)."""
    if preset is None:
        return shared
    fields = {key: value for key, value in preset.parameters.items() if key in connection.spec.parameters}
    fields.update(preset.fields)
    fields.update(shared.fields)
    return Shared(
        system_prompt=shared.system_prompt or preset.system_prompt, fields=fields, variables=preset.variables
    )


def _read(source: BatchInput, rules: InputRules) -> Iterator[ItemInput | LineError]:
    if source.kind == InputKind.CSV:
        return csv_items(source.stream, template=source.template, rules=rules)
    return jsonl_items(source.stream, rules)


def _check(
    results: Iterable[ItemInput | LineError],
    *,
    connection: ProviderConnection,
    model_id: str,
    window: ContextWindow | None,
) -> _Tally:
    """Every line's verdict, in line order: a bad line, one that cannot fit `window`, or an item
    counted into the estimate."""
    tally = _Tally()
    for chunk in batched(results, COUNT_CHUNK):
        requests = [result.chat_request(model_id) for result in chunk if isinstance(result, ItemInput)]
        counted = zip(requests, prompt_tokens_counts(connection=connection, requests=requests), strict=True)
        for result in chunk:
            if isinstance(result, ItemInput):
                request, count = next(counted)
                asked = request_max_tokens_asked(request)
                if overrun := window_overrun(prompt=count, max_tokens=asked, window=window):
                    lower = " or lower its max_tokens" if asked else ""
                    result = LineError(result.line, f"{overrun[0].upper()}{overrun[1:]}: shorten it{lower}.")
            if isinstance(result, LineError):
                tally.error_count += 1
                if len(tally.errors) < MAX_REPORTED_ERRORS:
                    tally.errors.append(result)
                continue
            tally.count += 1
            tally.prompt_tokens += count.tokens
            tally.prompt_counted = tally.prompt_counted and count.counted
            tally.output_tokens += result.body.get("max_tokens") or settings.BATCH_ESTIMATE_OUTPUT_TOKENS
            if len(tally.preview) < PREVIEW_ROWS:
                tally.preview.append(_preview_row(result))
    return tally


def _preview_row(item: ItemInput) -> PreviewRow:
    messages = item.body["messages"]
    last = messages[-1].get("content") if messages else ""
    text = last if isinstance(last, str) else "(content parts)"
    options = {
        key: value for key, value in item.body.items() if key not in ("messages", "tools", "response_format")
    }
    return {
        "line": item.line,
        "external_reference": item.external_reference,
        "messages": len(messages),
        "prompt": text[:300],
        "options": ", ".join(f"{key}={value}" for key, value in options.items()),
        "tools": len(item.body.get("tools") or []),
        "response_format": (item.body.get("response_format") or {}).get("type", ""),
    }


def _items_store(batch: Batch, results: Iterable[ItemInput | LineError]) -> None:
    chunk: list[BatchItem] = []
    for index, result in enumerate(results):
        if isinstance(result, LineError):  # the input changed between the two reads
            raise BatchInputInvalid([result], 1)
        chunk.append(
            BatchItem(
                batch=batch,
                index=index,
                line=result.line,
                external_reference=result.external_reference,
                request=result.body,
            )
        )
        if len(chunk) >= INSERT_CHUNK:
            BatchItem.objects.bulk_create(chunk)
            chunk = []
    BatchItem.objects.bulk_create(chunk)


def batch_path_for(*, connection: ProviderConnection, model_id: str, day: dt.date) -> tuple[str, str]:
    """Where a batch runs, and why (the detail page shows the reason)."""
    concurrency = settings.BATCH_CONCURRENCY
    spread = f"its items run as separate requests, {concurrency} at a time."
    if not connection.spec.queue:
        return BatchPath.CONCURRENT, f"{connection.spec.label} connections have no batch queue: {spread}"
    if connection.kind == ConnectionKind.ENGINE:
        return BatchPath.QUEUE, "The embedded engine serves Workers AI's batch queue (?queueRequest=true)."
    model = catalog_model_serving(model_id=model_id, day=day)
    if model is None:
        return (
            BatchPath.CONCURRENT,
            f"The catalogue does not know {model_id}, so it is not sent to the queue: {spread}",
        )
    if not model.supports_batch:
        return BatchPath.CONCURRENT, f"{model.display_name} does not take Workers AI's batch queue: {spread}"
    return BatchPath.QUEUE, f"{model.display_name} takes Workers AI's batch queue (?queueRequest=true)."


def batch_estimate(
    *, context: RequestContext, prompt_tokens: int, prompt_counted: bool, output_tokens: int
) -> BatchEstimate:
    """The prompt's tokens (counted, or estimated) and the output's x the card that will price
    the items (the team's override when it has one, else the global card, in force on
    `context.priced_on`), with and without the assumed share of cached prompt tokens. Strings,
    to keep JSON exact."""
    share = Decimal(str(settings.BATCH_ESTIMATE_CACHE_SHARE))
    known = request_price_card(context=context)
    card = known.card
    plain = cost_estimate(card=known, prompt_tokens=prompt_tokens, output_tokens=output_tokens).cost
    cached = cost_estimate(
        card=known, prompt_tokens=prompt_tokens, output_tokens=output_tokens, cache_share=share
    ).cost
    return {
        "prompt_tokens": prompt_tokens,
        "prompt_counted": prompt_counted,
        "output_tokens": output_tokens,
        "cache_share": str(share),
        "cost": str(plain) if plain is not None else None,
        "cost_with_cache": str(cached) if cached is not None else None,
        "price_card": known.label,
        "price_card_override": bool(card and card.is_override),
        "priced_on": str(context.priced_on),
        "output_assumption": settings.BATCH_ESTIMATE_OUTPUT_TOKENS,
    }


def batch_estimate_today(*, batch: Batch) -> BatchEstimate:
    """A draft's estimate as it would be priced if confirmed now: its tokens priced by the card
    in force today (a draft may wait past a price change, or past midnight). A confirmed
    batch's estimate is the one it was confirmed with."""
    estimate: BatchEstimate = batch.estimate  # as stored (NOT NULL); `{}` on a batch made without one
    if batch.status != BatchStatus.DRAFT or "prompt_tokens" not in estimate:
        return estimate
    today = timezone.now().date()
    return batch_estimate(
        context=draft_context(batch, today),
        prompt_tokens=estimate["prompt_tokens"],
        prompt_counted=estimate.get("prompt_counted", False),  # drafts from before counting were estimated
        output_tokens=estimate["output_tokens"],
    )
