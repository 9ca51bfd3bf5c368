"""Prompt tokens counted by the model's own tokenizer, where one is known.

- The embedded engine: its tokenize route (`POST {ENGINE_URL}/engine/v1/tokenize`,
  docs/engine.md), sent the body the adapter would post. The engine renders the model's chat
  template (tool and JSON instructions included) and tokenizes it as the request itself would
  be: the count is what the answer's `usage.prompt_tokens` would say.
- OpenAI's models on an OpenAI-compatible connection (gpt-4o, gpt-4.1, gpt-5, the o-series,
  gpt-4, gpt-3.5-turbo: whatever `tiktoken.encoding_name_for_model` maps to an encoding
  vendored in `tiktoken_files/`, with or without an `openai/` prefix): tiktoken, the messages
  framed as OpenAI's cookbook counts them (3 tokens a message, 1 more for a name, 3 to prime
  the answer). OpenAI does not publish how it renders tool definitions and JSON schemas, so
  those count as their JSON text: close, not exact.

Anything else (Workers AI's models, other endpoints' models, a request with images for tiktoken,
an engine that does not answer in time) gets None here, and the caller estimates
(`usage.token_count`). Counts are cached per counting method and request digest: the pre-flight
asks at every pause in typing, mostly for a history it has counted before.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import tiktoken
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ValidationError

from playground.providers.adapters import ChatRequest, adapter_for
from playground.providers.http import TimeoutPolicy, UpstreamHTTPError, upstream_stream
from playground.providers.kinds import ConnectionKind, WireFormat
from playground.providers.models import ProviderConnection

logger = logging.getLogger(__name__)

COUNT_SECONDS = 600  # how long a count is kept, per request digest
# Counting is quick (a long conversation takes milliseconds): an engine slower than this is
# busy or gone, and the estimate does instead.
ENGINE_TIMEOUT = TimeoutPolicy(connect=2.0, first_byte=10.0, total=15.0)
# Requests per tokenize call, and their JSON bytes (well under the engine's body limit).
ENGINE_CHUNK_REQUESTS = 200
ENGINE_CHUNK_BYTES = 4_000_000
TIKTOKEN_FILES = Path(__file__).resolve().parent / "tiktoken_files"
MESSAGE_TOKENS = 3  # OpenAI's framing of each message (<|start|>role ... <|end|>)
NAME_TOKENS = 1
REPLY_TOKENS = 3  # the answer's <|start|>assistant<|message|>


@dataclass(frozen=True)
class VendoredEncoding:
    """A tiktoken encoding whose BPE file is in `tiktoken_files/` (see its README)."""

    sha256: str  # tiktoken's own `expected_hash` for the file
    pattern: str  # as tiktoken 0.14.0 defines it (`tiktoken_ext/openai_public.py`)
    special_tokens: dict[str, int]


_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
    r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
ENCODINGS = {
    "o200k_base": VendoredEncoding(
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pattern=_O200K_PATTERN,
        special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
    "cl100k_base": VendoredEncoding(
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pattern=_CL100K_PATTERN,
        special_tokens={
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
}


class Tokenizer(Protocol):
    """One way of counting a model's prompts."""

    name: str  # what the cache keys say counted them (the method and the model)

    def material(self, request: ChatRequest) -> Any:
        """What of the request the count depends on (JSON): the cache key's digest is of it."""
        ...

    def count(self, requests: Sequence[ChatRequest]) -> list[int | None]: ...


def tokenizer_counts(*, connection: ProviderConnection, requests: Sequence[ChatRequest]) -> list[int | None]:
    """Each request's prompt tokens by its model's tokenizer; None where there is none (or it
    failed). Blocking: the engine is asked over HTTP."""
    tokenizer = tokenizer_for(connection, requests[0].model) if requests else None
    if tokenizer is None:
        return [None] * len(requests)
    keys = [f"prompt-tokens:{tokenizer.name}:{_digest(tokenizer.material(request))}" for request in requests]
    found: dict[str, int] = cache.get_many(keys)
    missing = [index for index, key in enumerate(keys) if key not in found]
    if missing:
        counted = tokenizer.count([requests[index] for index in missing])
        fresh = {
            keys[index]: count for index, count in zip(missing, counted, strict=True) if count is not None
        }
        cache.set_many(fresh, COUNT_SECONDS)
        found.update(fresh)
    return [found.get(key) for key in keys]


def tokenizer_for(connection: ProviderConnection, model_id: str) -> Tokenizer | None:
    """How `model_id` on `connection` is counted; None: it is estimated."""
    if connection.kind == ConnectionKind.ENGINE:
        try:
            return EngineTokenizer(connection, model_id)
        except ValidationError:
            return None
    if connection.spec.wire == WireFormat.OPENAI and (encoding := tiktoken_encoding_name(model_id)):
        return TiktokenTokenizer(encoding)
    return None


def tiktoken_encoding_name(model_id: str) -> str | None:
    """The vendored tiktoken encoding of an OpenAI model id, or None."""
    try:
        name = tiktoken.encoding_name_for_model(model_id.removeprefix("openai/"))
    except KeyError:
        return None
    return name if name in ENCODINGS else None


class EngineTokenizer:
    def __init__(self, connection: ProviderConnection, model_id: str) -> None:
        self._adapter = adapter_for(connection)  # ValidationError: the connection is unusable
        self.name = f"engine:{settings.ENGINE_URL}:{model_id}"

    def material(self, request: ChatRequest) -> Any:
        return {**self._adapter.payload(request), "model": request.model}

    def count(self, requests: Sequence[ChatRequest]) -> list[int | None]:
        counts: list[int | None] = []
        for chunk in _chunks([self.material(request) for request in requests]):
            counts += async_to_sync(_engine_counts)(chunk)
        return counts


async def _engine_counts(bodies: list[dict[str, Any]]) -> list[int | None]:
    """One tokenize call for `bodies` (of one model): their counts, or Nones if it failed."""
    url = f"{settings.ENGINE_URL}/engine/v1/tokenize"
    headers = {"accept": "application/json", "content-type": "application/json"}
    if settings.ENGINE_API_TOKEN:
        headers["authorization"] = f"Bearer {settings.ENGINE_API_TOKEN}"
    body = {"model": bodies[0]["model"], "requests": bodies}
    try:
        async with upstream_stream(
            "POST", url, headers=headers, json=body, timeout_policy=ENGINE_TIMEOUT
        ) as response:
            rows = json.loads(await response.read())["requests"]
        return [int(row["prompt_tokens"]) for row in rows]
    except (UpstreamHTTPError, ValueError, KeyError, TypeError) as exc:
        logger.info("the engine did not count %d prompts (%s): estimating them", len(bodies), exc)
        return [None] * len(bodies)


def _chunks(bodies: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """`bodies` in runs of one model, each under `ENGINE_CHUNK_REQUESTS` and `ENGINE_CHUNK_BYTES`."""
    chunks: list[list[dict[str, Any]]] = []
    size = 0
    for body in bodies:
        length = len(json.dumps(body, ensure_ascii=False))
        current = chunks[-1] if chunks else None
        if (
            current is None
            or current[0]["model"] != body["model"]
            or len(current) >= ENGINE_CHUNK_REQUESTS
            or size + length > ENGINE_CHUNK_BYTES
        ):
            chunks.append([])
            size = 0
        chunks[-1].append(body)
        size += length
    return chunks


class TiktokenTokenizer:
    def __init__(self, encoding: str) -> None:
        self._encoding = encoding
        self.name = f"tiktoken:{encoding}"

    def material(self, request: ChatRequest) -> Any:
        return [request.messages, request.tools, request.response_format]

    def count(self, requests: Sequence[ChatRequest]) -> list[int | None]:
        encoding = tiktoken_encoding(self._encoding)
        return [_framed_count(encoding, request) for request in requests]


@functools.cache
def tiktoken_encoding(name: str) -> tiktoken.Encoding:
    """The encoding, from its vendored BPE file (checked against tiktoken's own SHA-256)."""
    vendored = ENCODINGS[name]
    data = (TIKTOKEN_FILES / f"{name}.tiktoken").read_bytes()
    if hashlib.sha256(data).hexdigest() != vendored.sha256:
        raise ValueError(f"{name}.tiktoken does not match its SHA-256: the vendored file is damaged.")
    rows = (line.split() for line in data.splitlines())
    ranks = {base64.b64decode(token): int(rank) for token, rank in rows}
    return tiktoken.Encoding(
        name, pat_str=vendored.pattern, mergeable_ranks=ranks, special_tokens=vendored.special_tokens
    )


def _framed_count(encoding: tiktoken.Encoding, request: ChatRequest) -> int | None:
    """The prompt as OpenAI frames chat messages; None for a request with images."""
    tokens = REPLY_TOKENS
    for message in request.messages:
        texts = _message_texts(message)
        if texts is None:
            return None
        tokens += MESSAGE_TOKENS + (NAME_TOKENS if message.get("name") else 0)
        tokens += sum(len(encoding.encode_ordinary(text)) for text in texts)
    for sent in (request.tools, request.response_format):
        if sent:
            tokens += len(encoding.encode_ordinary(json.dumps(sent, ensure_ascii=False)))
    return tokens


def _message_texts(message: Mapping[str, Any]) -> list[str] | None:
    """What of a message the model reads as text: its role, name, content and tool calls; None
    when a content part is not text (an image)."""
    texts = [str(message.get("role") or ""), str(message.get("name") or "")]
    content = message.get("content")
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, Mapping) or part.get("type") != "text":
                return None
            texts.append(str(part.get("text") or ""))
    elif content is not None:
        texts.append(str(content))
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            arguments = function.get("arguments") or ""
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            texts += [str(function.get("name") or ""), arguments]
    return texts


def _digest(material: Any) -> str:
    return hashlib.sha256(json.dumps(material, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
