"""Do JSON answers cut short by `max_tokens` still parse? Schema requests with small budgets.

Sends N requests (default 200, half to each model, both at once) to the two local models,
SmolLM2 135M Instruct and Gemma 3 270M (two replicas, so its half does not queue behind one),
through the engine's HTTP API (`/ai/run`): each with a JSON schema (`response_format`)
taken in turn from a few shapes that cut in different places (strings with escapes and enums,
nested arrays, numbers, a `$ref` union, a tuple, a bare `json_object`), a prompt that asks for far
more than fits, a `max_tokens` from 8 to 80, temperature 0, 0.7 or 1 with a seed, and one in four
streamed. Each answer's text (the streamed deltas joined) must parse as JSON; the script counts
those that do, those the engine closed early (`closed_early` on the choice, `finish_reason`
"length"), those that also validate against their schema, and any request refused.
Target: every answer parses, on both models.

    .venv/bin/python benchmarks/schema_close.py
    .venv/bin/python benchmarks/schema_close.py --requests 400   # 200 to each model
    .venv/bin/python benchmarks/schema_close.py --requests 50 --show   # print each answer too
    .venv/bin/python benchmarks/schema_close.py --smoke   # seconds: the test suite runs this
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playground.engine.config import DEFAULT_REPLICAS  # noqa: E402
from tests.support.engine import GEMMA, MODEL_ID, EngineProcess, start_engine  # noqa: E402

SMOKE = {"requests": 8, "replicas": 1, "gemma_replicas": 1}
BUDGETS = [8, 12, 16, 24, 32, 48, 64, 80]
TEMPERATURES = [0.0, 0.7, 1.0]

SCHEMAS: list[tuple[str, dict[str, Any]]] = [
    (
        "Invent a person and tell their whole life story, with quotes and a file path.",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "pet": {"type": "string", "enum": ["cat", "dog", "none"]},
                "story": {"type": "string"},
            },
            "required": ["name"],
        },
    ),
    (
        "List many cities of the world and, for each, several of its districts.",
        {
            "type": "object",
            "properties": {
                "cities": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
            },
            "required": ["cities"],
            "additionalProperties": False,
        },
    ),
    (
        "Give the temperatures of the last thirty days as precise decimal numbers.",
        {"type": "array", "items": {"type": "number"}},
    ),
    (
        "Describe a shop's stock: every item, its size and its price.",
        {
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/item"}}},
            "required": ["items"],
            "$defs": {
                "item": {
                    "anyOf": [
                        {"type": "string"},
                        {
                            "type": "object",
                            "properties": {
                                "size": {"enum": ["S", "M", "XL"]},
                                "price": {"type": "number"},
                            },
                            "required": ["size"],
                        },
                    ]
                }
            },
        },
    ),
    (
        "Answer with a yes or no, a count, and a long explanation.",
        {"type": "array", "prefixItems": [{"type": "boolean"}, {"type": "integer"}, {"type": "string"}]},
    ),
    ("Describe a cat in JSON, with every detail you can think of.", {"type": "object"}),
]


@dataclass(frozen=True)
class Request:
    prompt: str
    schema: dict[str, Any]
    max_tokens: int
    temperature: float
    seed: int
    stream: bool

    def body(self) -> dict[str, Any]:
        bare_object = self.schema == {"type": "object"}
        response_format = (
            {"type": "json_object"}
            if bare_object
            else {"type": "json_schema", "json_schema": {"name": "answer", "schema": self.schema}}
        )
        return {
            "messages": [{"role": "user", "content": self.prompt}],
            "response_format": response_format,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
            "stream": self.stream,
        }


@dataclass(frozen=True)
class Outcome:
    status: int
    text: str = ""
    finish_reason: str = ""
    closed_early: dict[str, Any] | None = None
    error: str = ""


def requests(count: int) -> list[Request]:
    return [
        Request(
            prompt=SCHEMAS[index % len(SCHEMAS)][0],
            schema=SCHEMAS[index % len(SCHEMAS)][1],
            max_tokens=BUDGETS[(index // len(SCHEMAS)) % len(BUDGETS)],
            temperature=TEMPERATURES[index % len(TEMPERATURES)],
            seed=index,
            stream=index % 4 == 3,
        )
        for index in range(count)
    ]


async def send(client: httpx.AsyncClient, engine: EngineProcess, model: str, request: Request) -> Outcome:
    url = engine.run_url(model)
    if not request.stream:
        response = await client.post(url, headers=engine.headers, json=request.body())
        payload = response.json()
        if not payload["success"]:
            return Outcome(response.status_code, error=payload["errors"][0]["message"])
        choice = payload["result"]["choices"][0]
        return Outcome(200, choice["message"]["content"], choice["finish_reason"], choice.get("closed_early"))
    parts: list[str] = []
    ending: dict[str, Any] = {}
    async with client.stream("POST", url, headers=engine.headers, json=request.body()) as response:
        if response.status_code != 200:
            body = json.loads(await response.aread())
            return Outcome(response.status_code, error=body["errors"][0]["message"])
        async for line in response.aiter_lines():
            data = line.removeprefix("data: ")
            if not line.startswith("data: ") or data == "[DONE]":
                continue
            chunk = json.loads(data)
            for choice in chunk.get("choices", []):
                parts.append(choice["delta"].get("content") or "")
                ending = choice if choice.get("finish_reason") else ending
    return Outcome(200, "".join(parts), ending.get("finish_reason", ""), ending.get("closed_early"))


async def send_all(
    engine: EngineProcess, batch: list[Request], models: list[str]
) -> dict[str, list[Outcome]]:
    """Every request to every model at once; each model's replicas take them in turn."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(3600.0)) as client:
        answers = await asyncio.gather(
            *(send(client, engine, model, request) for model in models for request in batch)
        )
    size = len(batch)
    return {model: list(answers[index * size : (index + 1) * size]) for index, model in enumerate(models)}


def judge(request: Request, outcome: Outcome) -> Counter[str]:
    """What one answer counts towards: parsed, closed, valid, refused, broken."""
    if outcome.status != 200:
        return Counter(refused=1)
    try:
        value = json.loads(outcome.text)
    except ValueError:
        return Counter(broken=1)
    counts = Counter(parsed=1, closed=outcome.closed_early is not None)
    counts["valid"] = not list(
        jsonschema.validators.validator_for(request.schema)(request.schema).iter_errors(value)
    )
    return counts


def report(batch: list[Request], outcomes: dict[str, list[Outcome]], *, show: bool, smoke: bool) -> None:
    names = {MODEL_ID: "default", GEMMA: "gemma"}
    totals: dict[str, Counter[str]] = {}
    for model, answers in outcomes.items():
        totals[model] = sum((judge(r, o) for r, o in zip(batch, answers, strict=True)), Counter())
        if show:
            print(f"\n== {model} ==")
            for request, outcome in zip(batch, answers, strict=True):
                added = (outcome.closed_early or {}).get("appended", "")
                answer = outcome.text or outcome.error
                print(f"- max_tokens {request.max_tokens}: {answer!r} (closed with {added!r})")
        for request, outcome in zip(batch, answers, strict=True):
            if outcome.status != 200 or judge(request, outcome)["broken"]:
                print(f"  {names[model]}: max_tokens {request.max_tokens}: {outcome.text or outcome.error!r}")
    print(
        f"\n{len(batch) * len(outcomes)} schema requests, {len(batch)} to each model, "
        f"max_tokens {BUDGETS[0]}-{BUDGETS[-1]}"
    )
    print(
        "schema close: "
        + ", ".join(
            f"{names[model]} {count['parsed']} of {len(batch)} parsed ({count['closed']} closed early, "
            f"{count['valid']} valid, {count['refused']} refused, {count['broken']} broken)"
            for model, count in totals.items()
        )
    )
    every = all(count["parsed"] == len(batch) for count in totals.values())
    print("\n== target ==" + (" (a smoke run: too small to judge it)" if smoke else ""))
    print(f"  every answer parses, on both models: {'met' if every else 'MISSED'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="in all, half to each model")
    parser.add_argument("--replicas", type=int, default=DEFAULT_REPLICAS, help="of the default model")
    parser.add_argument("--gemma-replicas", type=int, default=2)
    parser.add_argument("--show", action="store_true", help="print every answer")
    parser.add_argument("--smoke", action="store_true", help="a tiny run of every path (seconds)")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    models = [MODEL_ID, GEMMA]
    batch = requests(args.requests // len(models))
    with tempfile.TemporaryDirectory() as workdir:
        engine = start_engine(Path(workdir), replicas=args.replicas, gemma_replicas=args.gemma_replicas)
        try:
            outcomes = asyncio.run(send_all(engine, batch, models))
        finally:
            engine.stop()
    report(batch, outcomes, show=args.show, smoke=args.smoke)


if __name__ == "__main__":
    main()
