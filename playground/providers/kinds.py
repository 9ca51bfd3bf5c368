"""The provider registry: every connection kind's label, help text, fields and capabilities.

The one place that says what a kind is. Forms, pages, validation, adapters and features
(batches, the composer) read `kind_spec(kind)` instead of matching on the kind themselves,
so a new kind is one entry here plus, if it speaks a new wire format, one adapter.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from django.db import models


class ConnectionKind(models.TextChoices):
    WORKERS_AI = "workers-ai", "Cloudflare Workers AI"
    OPENAI_COMPATIBLE = "openai-compatible", "OpenAI-compatible endpoint"
    ENGINE = "engine", "Embedded engine"


class WireFormat(StrEnum):
    WORKERS_AI = "workers-ai"  # POST {base}/accounts/{account}/ai/run/{model}
    OPENAI = "openai"  # POST {base}/chat/completions


@dataclass(frozen=True)
class KindSpec:
    kind: ConnectionKind
    wire: WireFormat
    help: str  # shown where a connection of this kind is chosen
    needs_base_url: bool  # no usable default base URL
    needs_account_id: bool
    takes_token: bool  # the user stores an API token for it
    # Its model list is not fixed by the catalogue: any gateway, or an engine serving another GGUF.
    free_model_id: bool
    # Serves Workers AI's pull-based queue (`?queueRequest=true`, poll by request_id).
    queue: bool
    # Streams `response_format: json_schema`. None: it depends on the model (the catalogue says).
    streams_json_schema: bool | None
    # Request fields it accepts besides messages (a connection never receives the others).
    parameters: frozenset[str]

    @property
    def label(self) -> str:
        return str(self.kind.label)


ENGINE_PARAMETERS = frozenset({"temperature", "top_p", "max_tokens", "seed", "stop"})
COMMON_PARAMETERS = ENGINE_PARAMETERS | {"presence_penalty", "frequency_penalty"}
REASONING_PARAMETERS = frozenset({"reasoning_effort", "chat_template_kwargs"})

KINDS: dict[str, KindSpec] = {
    spec.kind.value: spec
    for spec in (
        KindSpec(
            kind=ConnectionKind.ENGINE,
            wire=WireFormat.WORKERS_AI,
            help="Runs on this machine's CPU, priced as if it were Kimi K2.5 to compare costs.",
            needs_base_url=False,
            needs_account_id=False,
            takes_token=False,
            free_model_id=True,
            queue=True,
            streams_json_schema=True,
            parameters=ENGINE_PARAMETERS,
        ),
        KindSpec(
            kind=ConnectionKind.WORKERS_AI,
            wire=WireFormat.WORKERS_AI,
            help="Models from the catalogue, billed at Workers AI list prices.",
            needs_base_url=False,
            needs_account_id=True,
            takes_token=True,
            free_model_id=False,
            queue=True,
            streams_json_schema=None,
            parameters=COMMON_PARAMETERS | REASONING_PARAMETERS,
        ),
        KindSpec(
            kind=ConnectionKind.OPENAI_COMPATIBLE,
            wire=WireFormat.OPENAI,
            help="Pick a catalogued model or type the id your endpoint expects.",
            needs_base_url=True,
            needs_account_id=False,
            takes_token=True,
            free_model_id=True,
            queue=False,
            streams_json_schema=True,
            parameters=COMMON_PARAMETERS | REASONING_PARAMETERS,
        ),
    )
}


def kind_spec(kind: str) -> KindSpec:
    """The registry entry of a kind; `KeyError` for a kind nobody registered."""
    return KINDS[kind]
