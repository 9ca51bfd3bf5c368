"""Do the engine's local models answer? Short prompts whose answers a program can check.

Each prompt goes to each model the engine serves, SmolLM2 135M Instruct (the default) and
Gemma 3 270M, through the engine's HTTP API (`/ai/v1/chat/completions`): one user message,
no system prompt, temperature 0, at most 64 tokens. The answers are checked mechanically:

- exact: the whole answer, trimmed of spaces, quotes, `*` and a final `.` or `!`, is one of
  the accepted answers (ignoring case unless the prompt is about case);
- number: the first number in the answer (digits, or words such as "seven" or
  "twenty-four") that the prompt does not itself contain is the expected one;
- word: the answer contains the expected word, as a whole word;
- list: the answer is exactly N comma-separated items, each one of a known set;
- json: the answer is a JSON object (a ```json fence around it is allowed) equal to the one
  asked for.

An answer that contains the prompt itself (an echo, which is what a pretrained model tends to
produce) passes nothing, whatever follows it. The prompts were written once, before any run,
and are not tuned to either model. Targets: the default model passes at least 50 % and at
least 3x Gemma's rate; the quality model (`--quality`, Qwen2.5-Coder 1.5B Instruct, where
`make install ENGINE_MODEL=quality` placed it) at least 90 %.

    .venv/bin/python benchmarks/engine_instruct.py
    .venv/bin/python benchmarks/engine_instruct.py --quality   # the three models side by side
    .venv/bin/python benchmarks/engine_instruct.py --smoke   # seconds: the test suite runs this
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playground.engine.config import (  # noqa: E402
    DEFAULT_GEMMA_REPLICAS,
    DEFAULT_REPLICAS,
    QUALITY_MODEL_ID,
)
from tests.support.engine import GEMMA, MODEL_ID, EngineProcess, start_engine  # noqa: E402

MAX_TOKENS = 64
SMOKE = {"prompts": 3, "replicas": 1, "gemma_replicas": 1}  # every path, no figure to trust

Check = Callable[[str, str], bool]  # (prompt, answer) -> passed

# fmt: off
ONES = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
]
COLOURS = {
    "red", "orange", "yellow", "green", "blue", "indigo", "violet", "purple", "pink", "brown", "black",
    "white", "grey", "gray", "cyan", "magenta", "gold", "silver", "beige", "turquoise", "navy", "maroon",
}
# fmt: on
NUMBER_WORDS = {word: value for value, word in enumerate(ONES)}
TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80}


def _squash(text: str) -> str:
    return " ".join(text.lower().split())


def _trimmed(answer: str) -> str:
    return answer.strip().strip("\"'`*").strip().rstrip(".!").strip().strip("\"'`*").strip()


def numbers_in(text: str) -> list[int]:
    """Numbers written in digits or in words (up to eighty-nine), in order."""
    found = []
    for token in re.findall(r"\d+|[a-z]+(?:-[a-z]+)?", text.lower().replace(",", "")):
        if token.isdigit():
            found.append(int(token))
        elif token in NUMBER_WORDS:
            found.append(NUMBER_WORDS[token])
        elif token in TENS:
            found.append(TENS[token])
        elif (parts := token.partition("-"))[0] in TENS and 0 < NUMBER_WORDS.get(parts[2], 10) < 10:
            found.append(TENS[parts[0]] + NUMBER_WORDS[parts[2]])  # twenty-four
    return found


def exact(*accepted: str, case: bool = False) -> Check:
    def check(prompt: str, answer: str) -> bool:
        given = _trimmed(answer)
        return given in accepted if case else given.lower() in {a.lower() for a in accepted}

    return check


def number(expected: int) -> Check:
    def check(prompt: str, answer: str) -> bool:
        asked = set(numbers_in(prompt))
        new = [value for value in numbers_in(answer) if value not in asked]
        return bool(new) and new[0] == expected

    return check


def word(*words: str, case: bool = False) -> Check:
    flags = 0 if case else re.IGNORECASE

    def check(prompt: str, answer: str) -> bool:
        return any(re.search(rf"\b{re.escape(w)}\b", answer, flags) for w in words)

    return check


def listing(count: int, allowed: set[str]) -> Check:
    def check(prompt: str, answer: str) -> bool:
        items = [item.strip().lower() for item in _trimmed(answer).split(",")]
        return len(items) == count and all(item in allowed for item in items)

    return check


def json_equal(expected: dict[str, Any]) -> Check:
    def check(prompt: str, answer: str) -> bool:
        text = re.sub(r"^```(?:json)?\s*|\s*```$", "", answer.strip())
        try:
            return bool(json.loads(text) == expected)
        except ValueError:
            return False

    return check


@dataclass(frozen=True)
class Prompt:
    text: str
    check: Check
    kind: str  # what is checked, for the table
    # For a prompt that asks for a bare answer: the right answer in another shape (a sentence).
    # Reported beside the pass rate, never counted in it.
    loose: Check | None = None

    def passes(self, answer: str) -> bool:
        return not self.echoed(answer) and self.check(self.text, answer)

    def right_but_unformatted(self, answer: str) -> bool:
        return (
            not self.passes(answer)
            and not self.echoed(answer)
            and bool(self.loose and self.loose(self.text, answer))
        )

    def echoed(self, answer: str) -> bool:
        return _squash(self.text) in _squash(answer)  # an echo passes nothing


def only(text: str, *accepted: str, case: bool = False) -> Prompt:
    """A prompt that asks for nothing but one of `accepted`."""
    return Prompt(text, exact(*accepted, case=case), f"exact {accepted[0]}", loose=word(*accepted, case=case))


PROMPTS = [
    only("What is 7 plus 5? Reply with only the number.", "12"),
    only("What is 9 minus 4? Reply with only the number.", "5"),
    Prompt("What is 10 times 3?", number(30), "number 30"),
    Prompt("How many days are there in a week?", number(7), "number 7"),
    Prompt("How many legs does a spider have?", number(8), "number 8"),
    Prompt("How many hours are there in a day?", number(24), "number 24"),
    only("What is the capital of France? Answer with one word.", "Paris"),
    Prompt("What is the capital of Japan?", word("Tokyo"), "word Tokyo"),
    only("What color is the sky on a clear day? Answer with one word.", "blue"),
    only("What is the opposite of hot? Answer with one word.", "cold"),
    Prompt("Which animal says meow?", word("cat", "cats"), "word cat"),
    Prompt("What is the largest planet in our solar system?", word("Jupiter"), "word Jupiter"),
    Prompt("What do bees make?", word("honey"), "word honey"),
    Prompt("What is the first month of the year?", word("January"), "word January"),
    only("Reply with only yes.", "yes"),
    only("Reply with only the word OK.", "OK"),
    only("Is the sun hot? Reply with only yes or no.", "yes"),
    only("Is a mouse bigger than an elephant? Reply with only yes or no.", "no"),
    only("Write the word apple in capital letters and nothing else.", "APPLE", case=True),
    Prompt("List three colours, separated by commas, and nothing else.", listing(3, COLOURS), "3 colours"),
    Prompt(
        'Give me a JSON object with a key "name" set to "Ada" and a key "age" set to 36. '
        "Reply with the JSON only.",
        json_equal({"name": "Ada", "age": 36}),
        "json name/age",
    ),
    Prompt(
        'Reply with a JSON object that has one key, "color", whose value is "red".',
        json_equal({"color": "red"}),
        "json color",
    ),
    Prompt(
        "Describe a person named Bob who is 40 years old as a JSON object with the keys name and age.",
        json_equal({"name": "Bob", "age": 40}),
        "json Bob/40",
    ),
    only(
        'Translate the English word "dog" into French. Reply with only the French word.', "chien", "le chien"
    ),
    Prompt('What is the Spanish word for "water"?', word("agua"), "word agua"),
    Prompt('How do you say "thank you" in German?', word("danke"), "word danke"),
    Prompt('Translate "cat" into Spanish.', word("gato"), "word gato"),
]


async def answer(client: httpx.AsyncClient, engine: EngineProcess, model: str, prompt: str) -> str:
    response = await client.post(
        f"{engine.url}/client/v4/accounts/bench/ai/v1/chat/completions",
        headers=engine.headers,
        json={
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "max_tokens": MAX_TOKENS,
        },
    )
    response.raise_for_status()
    return str(response.json()["choices"][0]["message"]["content"])


async def ask_all(engine: EngineProcess, prompts: list[Prompt], models: list[str]) -> dict[str, list[str]]:
    """Every prompt to every model at once; each model's replicas take them in turn."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(1800.0)) as client:
        results = {
            model: await asyncio.gather(*(answer(client, engine, model, p.text) for p in prompts))
            for model in models
        }
    return {model: list(answers) for model, answers in results.items()}


def _excerpt(text: str, width: int = 34) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def report(prompts: list[Prompt], answers: dict[str, list[str]], *, smoke: bool, show_answers: bool) -> None:
    models = list(answers)
    passed = {model: [p.passes(a) for p, a in zip(prompts, answers[model], strict=True)] for model in models}
    short = {MODEL_ID: "default (SmolLM2)", GEMMA: "Gemma", QUALITY_MODEL_ID: "quality (Qwen2.5-Coder)"}
    print(f"\n{'prompt':<46} {'check':<14} " + " ".join(f"{short[model]:<42}" for model in models))
    for index, prompt in enumerate(prompts):
        cells = [f"{'PASS' if passed[m][index] else 'fail'} {_excerpt(answers[m][index])!r}" for m in models]
        row = " ".join(f"{cell:<42}" for cell in cells)
        print(f"{_excerpt(prompt.text, 45):<46} {prompt.kind:<14} {row}")
    if show_answers:
        for model in models:
            print(f"\n== {model}: whole answers ==")
            for prompt, text in zip(prompts, answers[model], strict=True):
                print(f"- {prompt.text}\n  {'PASS' if prompt.passes(text) else 'fail'}: {text!r}")
    rates = {model: sum(results) / len(results) for model, results in passed.items()}
    counts = {model: f"{sum(results)} of {len(results)}" for model, results in passed.items()}
    ratio = f"{rates[MODEL_ID] / rates[GEMMA]:.1f}x" if rates[GEMMA] else "no Gemma pass to divide by"
    plain = {MODEL_ID: "default", GEMMA: "gemma", QUALITY_MODEL_ID: "quality"}
    print(
        "\ninstruct pass rate: "
        + ", ".join(f"{plain[model]} {100 * rates[model]:.1f} % ({counts[model]})" for model in models)
        + f"; default / gemma: {ratio}"
    )
    for model in models:
        loose = sum(p.right_but_unformatted(a) for p, a in zip(prompts, answers[model], strict=True))
        echoes = sum(p.echoed(a) for p, a in zip(prompts, answers[model], strict=True))
        print(
            f"  {short[model]}: {echoes} answers echo the prompt; {loose} failed ones hold the bare answer "
            "asked for inside a sentence (not counted)"
        )
    print("\n== targets ==" + (" (a smoke run: too small to judge them)" if smoke else ""))
    print(f"  default model >= 50 %: {'met' if rates[MODEL_ID] >= 0.5 else 'MISSED'}")
    print(f"  default model >= 3x Gemma: {'met' if rates[MODEL_ID] >= 3 * rates[GEMMA] else 'MISSED'}")
    if QUALITY_MODEL_ID in rates:
        print(f"  quality model >= 90 %: {'met' if rates[QUALITY_MODEL_ID] >= 0.9 else 'MISSED'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=DEFAULT_REPLICAS, help="of the default model")
    parser.add_argument("--gemma-replicas", type=int, default=DEFAULT_GEMMA_REPLICAS)
    parser.add_argument("--prompts", type=int, default=len(PROMPTS), help="the first N prompts only")
    parser.add_argument("--answers", action="store_true", help="print every whole answer too")
    parser.add_argument(
        "--quality",
        action="store_true",
        help=f"ask {QUALITY_MODEL_ID} too (installed by `make install ENGINE_MODEL=quality`)",
    )
    parser.add_argument("--smoke", action="store_true", help="a tiny run of every path (seconds)")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    prompts = PROMPTS[: args.prompts]
    models = [MODEL_ID, GEMMA, *([QUALITY_MODEL_ID] if args.quality else [])]
    print(f"{len(prompts)} prompts, temperature 0, at most {MAX_TOKENS} tokens, to {', '.join(models)}")
    with tempfile.TemporaryDirectory() as workdir:
        engine = start_engine(
            Path(workdir),
            replicas=args.replicas,
            gemma_replicas=args.gemma_replicas,
            env={"ENGINE_MODEL": "quality"} if args.quality else None,
        )
        try:
            answers = asyncio.run(ask_all(engine, prompts, models))
        finally:
            engine.stop()
    report(prompts, answers, smoke=args.smoke, show_answers=args.answers)


if __name__ == "__main__":
    main()
