"""What the front end and the replica processes say to each other over their pipe.

Everything here is a small frozen dataclass so it pickles cheaply and reads clearly on
both sides. A job's events always end with exactly one `Finished` or `Failed`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

# text: free text; json: the whole answer follows `grammar`; tools: the answer is a list of
# tool calls following `grammar`; auto: the first token chooses between tool calls and text.
Mode = Literal["text", "json", "tools", "auto"]


@dataclass(frozen=True)
class GenerationSpec:
    messages: list[dict[str, str]]  # roles system/user/assistant, text content only
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    mode: Mode = "text"
    grammar: str | None = None
    # Schemas the output is checked against after generation (the grammar already enforces them).
    response_schema: dict[str, Any] | None = None
    tool_schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Whose prefix cache this job may read and write: the account id of the request path.
    cache_scope: str = ""


# --- events of one job (replica -> front end) ---


@dataclass(frozen=True)
class Started:
    prompt_tokens: int
    cached_tokens: int


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCall:
    index: int
    id: str
    name: str
    arguments: str  # JSON text, already validated against the tool's parameters


@dataclass(frozen=True)
class ClosedEarly:
    """A JSON answer that `max_tokens` cut short, closed by the engine (`json_closer`)."""

    appended: str  # the text the engine added after the model's, already sent as text
    schema_error: str | None  # what the closed answer still breaks of its schema, if anything


@dataclass(frozen=True)
class Finished:
    finish_reason: str  # stop | length | tool_calls | cancelled
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    closed_early: ClosedEarly | None = None


@dataclass(frozen=True)
class Failed:
    code: int
    status: int
    message: str


Event = Started | TextDelta | ToolCall | Finished | Failed


# --- pipe messages ---


@dataclass(frozen=True)
class RunJob:
    job_id: str
    spec: GenerationSpec


@dataclass(frozen=True)
class CancelJob:
    job_id: str


@dataclass(frozen=True)
class Loaded:
    """The model is in memory; the start-up self-test comes next."""


@dataclass(frozen=True)
class SelfTest:
    """What a replica's start-up self-test generated, and how long it took."""

    tokens: int
    seconds: float


@dataclass(frozen=True)
class Ready:
    pid: int
    context_size: int
    self_test: SelfTest


@dataclass(frozen=True)
class Fatal:
    message: str


@dataclass(frozen=True)
class JobEvent:
    job_id: str
    event: Event
