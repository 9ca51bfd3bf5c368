"""Engine configuration: command-line flags, each mirrored by an `ENGINE_*` variable.

A flag wins over its variable, which wins over the default. The API token is read only
from the environment (`ENGINE_API_TOKEN` or `ENGINE_API_TOKEN_FILE`) so it never shows
up in a process listing. Without a token the engine serves loopback addresses only.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from playground.engine.routing import BALANCES
from playground.lib.env import env_int, env_secret, env_str

DEFAULT_MODEL_ID = "@local/smollm2-135m-instruct"
GEMMA_MODEL_ID = "@local/gemma-3-270m"
QUALITY_MODEL_ID = "@local/qwen2.5-coder-1.5b-instruct"
# `ENGINE_MODEL=quality` (chosen at install: `make run ENGINE_MODEL=quality`) adds the quality
# model, Qwen2.5-Coder 1.5B Instruct, as a third model beside the other two.
ENGINE_MODELS = ("smollm2", "quality")
DEFAULT_REPLICAS = 5  # odd: round-robin does not fall into step with 2 or 4 conversations in flight
# Gemma is the second model: one replica (~460 MB) keeps the default `make run` under 4 GB
# even with every replica's prefix cache full (docs/engine.md, "Replicas and affinity").
DEFAULT_GEMMA_REPLICAS = 1
# Qwen2.5-Coder 1.5B keeps 28 KB of KV per token (2 KV heads), so 8,192 of its trained 32,768
# cost about 230 MB in its one replica (docs/engine.md, "The quality model").
DEFAULT_QUALITY_CONTEXT_SIZE = 8192


@dataclass(frozen=True)
class EngineConfig:
    host: str
    port: int
    replicas: int  # of the default model
    gemma_replicas: int  # 0: Gemma is not served
    quality_replicas: int  # 0: the quality model is not served (ENGINE_MODEL is not "quality")
    balance: str  # round-robin | least-loaded, for requests without x-session-affinity
    model_path: Path | None  # None: the packaged SmolLM2 135M Instruct, fetched into cache_dir
    model_id: str
    chat_format: str  # a built-in name, a Jinja file, or "" for the template inside the GGUF
    context_size: int  # of the default model; 0: its GGUF's trained length
    gemma_context_size: int  # of Gemma (the same as `context_size` unless set)
    quality_context_size: int  # of the quality model
    threads: int  # per replica of SmolLM2 and Gemma
    quality_threads: int  # per replica of the quality model
    prefix_cache_bytes: int
    cache_dir: Path
    queue_path: Path
    max_body_bytes: int
    default_max_tokens: int
    api_token: str
    log_level: str


def _data_dir() -> Path:
    return Path(env_str("PLAYGROUND_DATA_DIR", "var"))


def _model_id_for(path: Path | None) -> str:
    if path is None:
        return DEFAULT_MODEL_ID
    slug = re.sub(r"[^a-z0-9.-]+", "-", path.name.removesuffix(".gguf").lower()).strip("-")
    return f"@local/{slug or 'model'}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _at_least(low: int) -> Callable[[str], int]:
    def check(value: str) -> int:
        number = int(value)
        if number < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {number}")
        return number

    return check


_positive = _at_least(1)


def build_parser() -> argparse.ArgumentParser:
    replicas = env_int("ENGINE_REPLICAS", DEFAULT_REPLICAS)
    parser = argparse.ArgumentParser(
        prog="python -m playground.engine",
        description="Serve a GGUF model over the Workers AI and OpenAI-compatible HTTP APIs.",
    )
    add = parser.add_argument
    add("--host", default=env_str("ENGINE_HOST", "127.0.0.1"), help="bind address [ENGINE_HOST]")
    add("--port", type=int, default=env_int("ENGINE_PORT", 8788), help="TCP port [ENGINE_PORT]")
    add(
        "--replicas",
        type=_positive,
        default=replicas,
        help="processes of the default model [ENGINE_REPLICAS]",
    )
    add(
        "--gemma-replicas",
        type=_at_least(0),
        default=env_int("ENGINE_GEMMA_REPLICAS", DEFAULT_GEMMA_REPLICAS),
        help=f"processes of {GEMMA_MODEL_ID}, the second model; 0: not served [ENGINE_GEMMA_REPLICAS]",
    )
    add(
        "--quality-replicas",
        type=_at_least(0),
        default=env_int("ENGINE_QUALITY_REPLICAS", 1 if env_str("ENGINE_MODEL") == "quality" else 0),
        help=f"processes of {QUALITY_MODEL_ID}; default 1 with ENGINE_MODEL=quality, else 0 "
        "[ENGINE_QUALITY_REPLICAS]",
    )
    add(
        "--balance",
        choices=BALANCES,
        default=env_str("ENGINE_BALANCE", "round-robin"),
        help="placement of requests without x-session-affinity [ENGINE_BALANCE]",
    )
    add(
        "--model",
        type=Path,
        default=env_str("ENGINE_MODEL_PATH") or None,
        help="GGUF file served instead of the default model [ENGINE_MODEL_PATH]",
    )
    add(
        "--model-id",
        default=env_str("ENGINE_MODEL_ID"),
        help="id the model is served under [ENGINE_MODEL_ID]",
    )
    add(
        "--chat-format",
        default=env_str("ENGINE_CHAT_FORMAT"),
        help="of --model: gemma, chatml, llama-3, mistral-instruct or a Jinja file [ENGINE_CHAT_FORMAT]",
    )
    add(
        "--context-size",
        type=_at_least(0),
        default=env_int("ENGINE_CONTEXT_SIZE", 4096),
        help="context window in tokens; 0: each GGUF's trained length [ENGINE_CONTEXT_SIZE]",
    )
    add(
        "--gemma-context-size",
        type=_at_least(0),
        default=env_int("ENGINE_GEMMA_CONTEXT_SIZE", -1),
        help=f"context window of {GEMMA_MODEL_ID}; default: --context-size [ENGINE_GEMMA_CONTEXT_SIZE]",
    )
    add(
        "--quality-context-size",
        type=_at_least(0),
        default=env_int("ENGINE_QUALITY_CONTEXT_SIZE", DEFAULT_QUALITY_CONTEXT_SIZE),
        help=f"context window of {QUALITY_MODEL_ID}; 0: its trained 32,768 [ENGINE_QUALITY_CONTEXT_SIZE]",
    )
    add(
        "--threads",
        type=_positive,
        default=env_int("ENGINE_THREADS", 0) or None,
        help="CPU threads per replica; default: cores / replicas [ENGINE_THREADS]",
    )
    add(
        "--quality-threads",
        type=_positive,
        default=env_int("ENGINE_QUALITY_THREADS", 0) or None,
        help=f"CPU threads per replica of {QUALITY_MODEL_ID}; default: every core [ENGINE_QUALITY_THREADS]",
    )
    add(
        "--prefix-cache-bytes",
        type=_positive,
        default=env_int("ENGINE_PREFIX_CACHE_BYTES", 256 * 1024 * 1024),
        help="prefix (KV state) cache per replica [ENGINE_PREFIX_CACHE_BYTES]",
    )
    add("--cache-dir", type=Path, default=env_str("ENGINE_CACHE_DIR") or None, help="[ENGINE_CACHE_DIR]")
    add("--queue-path", type=Path, default=env_str("ENGINE_QUEUE_PATH") or None, help="[ENGINE_QUEUE_PATH]")
    add(
        "--max-body-bytes",
        type=_positive,
        default=env_int("ENGINE_MAX_BODY_BYTES", 10 * 1000 * 1000),
        help="largest accepted request body [ENGINE_MAX_BODY_BYTES]",
    )
    add(
        "--default-max-tokens",
        type=_positive,
        default=env_int("ENGINE_DEFAULT_MAX_TOKENS", 256),
        help="completion budget when a request sets none [ENGINE_DEFAULT_MAX_TOKENS]",
    )
    add("--log-level", default=env_str("ENGINE_LOG_LEVEL", "INFO"), help="[ENGINE_LOG_LEVEL]")
    return parser


def load_config(argv: Sequence[str] | None = None) -> EngineConfig:
    parser = build_parser()
    args = parser.parse_args(argv)
    api_token = env_secret("ENGINE_API_TOKEN")
    if not api_token and not is_loopback(args.host):
        parser.error(
            f"refusing to serve {args.host} without authentication: set ENGINE_API_TOKEN (or "
            "ENGINE_API_TOKEN_FILE), or bind to a loopback address such as 127.0.0.1."
        )
    if args.balance not in BALANCES:  # a flag is checked by argparse, the variable is not
        parser.error(f"ENGINE_BALANCE must be one of {', '.join(BALANCES)}; got {args.balance!r}.")
    if (chosen := env_str("ENGINE_MODEL") or "smollm2") not in ENGINE_MODELS:
        parser.error(f"ENGINE_MODEL must be one of {', '.join(ENGINE_MODELS)}; got {chosen!r}.")
    model_id = args.model_id or _model_id_for(args.model)
    if model_id == GEMMA_MODEL_ID and args.gemma_replicas:
        parser.error(f"{GEMMA_MODEL_ID} is the packaged Gemma's id: choose another --model-id.")
    if model_id == QUALITY_MODEL_ID and args.quality_replicas:
        parser.error(f"{QUALITY_MODEL_ID} is the packaged quality model's id: choose another --model-id.")
    data_dir = _data_dir()
    threads = args.threads or max(1, (os.cpu_count() or 1) // (args.replicas + args.gemma_replicas))
    return EngineConfig(
        host=args.host,
        port=args.port,
        replicas=args.replicas,
        gemma_replicas=args.gemma_replicas,
        quality_replicas=args.quality_replicas,
        balance=args.balance,
        model_path=args.model,
        model_id=model_id,
        chat_format=args.chat_format,  # SmolLM2's GGUF carries its own template (ChatML)
        context_size=args.context_size,
        gemma_context_size=args.context_size if args.gemma_context_size < 0 else args.gemma_context_size,
        quality_context_size=args.quality_context_size,
        threads=threads,
        # The quality model is the one a user chose to wait for: it gets every core (the small
        # models' replicas, 1 thread each on 2 cores, are idle while a person reads its answer).
        quality_threads=args.quality_threads or os.cpu_count() or 1,
        prefix_cache_bytes=args.prefix_cache_bytes,
        cache_dir=args.cache_dir or data_dir / "models",
        queue_path=args.queue_path or data_dir / "engine-queue.sqlite3",
        max_body_bytes=args.max_body_bytes,
        default_max_tokens=args.default_max_tokens,
        api_token=api_token,
        log_level=args.log_level.upper(),
    )
