"""How fast does a local model answer? First token and tokens per second of a running engine.

Sends a few short chats, one at a time, streamed, temperature 0, to a model of an engine that is
already running (start it as docs/engine.md says), and prints per prompt the time to the first
token, the tokens generated and the rate after the first. Targets for the quality model
(`@local/qwen2.5-coder-1.5b-instruct`) on a 2-core machine otherwise idle: first token of a short
chat <= 3 s, >= 8 tokens/s. The load average is printed before and after: the figures mean
something only when it stays well under the number of cores.

    ENGINE_MODEL=quality ENGINE_API_TOKEN=t .venv/bin/python -m playground.engine --port 8962 &
    .venv/bin/python benchmarks/engine_speed.py --port 8962
"""

from __future__ import annotations

import argparse
import json
import os
import time

import httpx

PROMPTS = (
    "What is the capital of France?",
    "Write a Python function that reverses a string, with a docstring.",
    "Explain in three sentences what a prefix cache is.",
)


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def answer_timing(client: httpx.Client, url: str, model: str, prompt: str, max_tokens: int) -> str:
    """One streamed chat; a line with its first token time and generation rate."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    started = time.perf_counter()
    first: float | None = None
    usage: dict[str, int] = {}
    with client.stream("POST", url, json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line.removeprefix("data: "))
            usage = chunk.get("usage") or usage
            if first is None and any(c.get("delta", {}).get("content") for c in chunk.get("choices", [])):
                first = time.perf_counter()
    ended = time.perf_counter()
    if first is None:
        return f"{prompt[:40]!r}: no text came back"
    tokens = usage.get("completion_tokens", 0)
    rate = (tokens - 1) / (ended - first) if tokens > 1 and ended > first else 0.0
    return (
        f"{prompt[:40]!r}: first token {first - started:.2f} s, {tokens} tokens, "
        f"{rate:.1f} tokens/s after the first (prompt {usage.get('prompt_tokens', '?')} tokens)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, default=8962)
    parser.add_argument("--token", default=os.environ.get("ENGINE_API_TOKEN", "t"))
    parser.add_argument("--model", default="@local/qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}/client/v4/accounts/local/ai/v1/chat/completions"
    print(f"{args.model} on port {args.port}; load average before: {_load()}")
    with httpx.Client(headers={"authorization": f"Bearer {args.token}"}, timeout=600) as client:
        for prompt in PROMPTS:
            print(answer_timing(client, url, args.model, prompt, args.max_tokens))
    print(f"load average after: {_load()}")


if __name__ == "__main__":
    main()
