"""Checks: what an experiment scores each answer by. Pure functions, no Django.

Each check is a dict as stored on the experiment (`{"kind": "contains", "value": "refund"}`) and
gives a `Verdict`: a score in [0, 1] and a reason a person can read. A check's `value`, when it
has one, wins over the item's expected output; without one the expected output is used.

| kind | parameters | score |
| --- | --- | --- |
| `exact` | `value`?, `ignore_case`? | 1 if the answer (trimmed) equals it |
| `contains` | `value`?, `ignore_case`? | 1 if the answer contains it |
| `regex` | `pattern` | 1 if the pattern matches somewhere in the answer |
| `json_schema` | `schema` | 1 if the answer is JSON valid against the schema |
| `json_path` | `path` (`$.a.b[0]`), `value`? | 1 if the value at the path in the JSON answer equals it |
| `length` | `min`?, `max`? (characters) | 1 inside the range, else the share of the way there |
| `numeric` | `value`?, `tolerance` (absolute, 0) | its last number in tolerance: 1, then to 0 at 10x |
| `judge` | `prompt`, `connection`, `model`, `pass_at` (0.5) | the judge model's own score |

A judge is a model asked, with a prompt of the user's (`{{input}}`, `{{output}}` and
`{{expected}}` filled in), for `{"score": 0..1, "reason": "..."}`. Its call is not made here
(`evals.services.judging` makes it, in the worker); here are its prompt and the reading of its
answer, where an answer without a usable score is a verdict with no score (`None`): it scores
nothing, fails the check and says why.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema

KINDS = {
    "exact": "Exact match",
    "contains": "Contains",
    "regex": "Regex",
    "json_schema": "JSON schema valid",
    "json_path": "JSON path equals",
    "length": "Length in range",
    "numeric": "Numeric closeness",
    "judge": "LLM judge",
}
JUDGE = "judge"
JUDGE_PASS_AT = 0.5  # a judge's score at or above this passes, unless the check says otherwise
JUDGE_MAX_TOKENS = 300
JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "reason": {"type": "string"},
    },
    "required": ["score", "reason"],
    "additionalProperties": False,
}
JUDGE_INSTRUCTION = (
    "\n\nAnswer with only a JSON object: "
    '{"score": <a number from 0 (worst) to 1 (best)>, "reason": "<one sentence>"}.'
)
_PLACEHOLDER = re.compile(r"\{\{\s*(input|output|expected)\s*\}\}")
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
PASS_SCORE = 1.0  # an answer passes a check when it scores this (every check's full marks)
_PATH_STEP = re.compile(r"\.([A-Za-z_][\w-]*)|\[(\d+)\]|\[\"([^\"]*)\"\]")
_NUMBER = re.compile(r"-?\d+(?:[.,]\d+)?(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class Verdict:
    score: float | None  # in [0, 1]; None: no verdict (a judge's unusable answer), not a pass
    reason: str
    pass_at: float = PASS_SCORE

    @property
    def passed(self) -> bool:
        return self.score is not None and self.score >= self.pass_at


def check_label(check: Mapping[str, Any]) -> str:
    """What the results page calls a check: its name, else its kind and main parameter."""
    if check.get("name"):
        return str(check["name"])
    kind = str(check.get("kind", ""))
    detail = check.get("value") or check.get("pattern") or check.get("path") or ""
    if kind == "length":
        detail = f"{check.get('min', 0)}-{check.get('max', '∞')}"
    if kind == JUDGE:
        detail = str(check.get("model", ""))
    return f"{KINDS.get(kind, kind)}{f' {detail}' if detail else ''}"


def check_problem(check: Any) -> str:
    """Why a check as given cannot run ("" when it can): checked when the experiment is made."""
    if not isinstance(check, dict) or check.get("kind") not in KINDS:
        return f"Each check needs a kind: one of {', '.join(KINDS)}."
    kind = check["kind"]
    if kind == "regex":
        try:
            re.compile(str(check.get("pattern", "")))
        except re.error as exc:
            return f"The regex {check.get('pattern')!r} does not compile: {exc}."
        if not check.get("pattern"):
            return "A regex check needs a pattern."
    if kind == "json_schema":
        if not isinstance(check.get("schema"), dict):
            return "A json_schema check needs a schema (a JSON object)."
        try:
            jsonschema.Draft202012Validator.check_schema(check.get("schema") or {})
        except jsonschema.SchemaError as exc:
            return f"The JSON schema is not valid: {exc.message}."
    if kind == "json_path" and _path_steps(str(check.get("path", ""))) is None:
        return "A JSON path looks like $.answer or $.items[0].name."
    if kind == "length":
        low, high = check.get("min"), check.get("max")
        if not all(v is None or (isinstance(v, int) and v >= 0) for v in (low, high)) or low is high is None:
            return "A length check needs a minimum and/or a maximum, whole numbers of characters."
    if kind == "numeric":
        tolerance = check.get("tolerance", 0)
        if not isinstance(tolerance, int | float) or tolerance < 0:
            return "A numeric check's tolerance is a number, 0 or more."
    if kind == JUDGE:
        return _judge_problem(check)
    return ""


def _judge_problem(check: Mapping[str, Any]) -> str:
    if "output" not in {m.group(1) for m in _PLACEHOLDER.finditer(str(check.get("prompt", "")))}:
        return (
            "A judge's prompt names the answer it judges as {{output}} (and may use {{input}}, {{expected}})."
        )
    if not isinstance(check.get("connection"), int) or not str(check.get("model") or "").strip():
        return "A judge needs a connection (its id) and a model."
    pass_at = check.get("pass_at", JUDGE_PASS_AT)
    if not isinstance(pass_at, int | float) or not 0 <= pass_at <= 1:
        return "A judge's pass_at is a score from 0 to 1."
    return ""


def is_judge(check: Mapping[str, Any]) -> bool:
    return check.get("kind") == JUDGE


def judge_messages(
    check: Mapping[str, Any], *, input_text: str, answer: str, expected: str
) -> list[dict[str, str]]:
    """The judge's request: the user's prompt with its placeholders filled, and the answer's format."""
    values = {"input": input_text, "output": answer, "expected": expected}
    prompt = _PLACEHOLDER.sub(lambda m: values[m.group(1)], str(check["prompt"]))
    return [{"role": "user", "content": prompt + JUDGE_INSTRUCTION}]


def judge_verdict(check: Mapping[str, Any], text: str) -> Verdict:
    """Read a judge's answer: a JSON object with a score in [0, 1] (a fenced block, or an object
    among other words, will do); anything else is no verdict, with why."""
    pass_at = float(check.get("pass_at", JUDGE_PASS_AT))
    found = _JSON_OBJECT.search(text)
    try:
        value = json.loads(found.group(0) if found else text)
    except ValueError:
        return Verdict(None, f"The judge did not answer JSON: {text.strip()[:80]!r}.", pass_at)
    score = value.get("score") if isinstance(value, dict) else None
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
        return Verdict(None, f"The judge gave no score from 0 to 1: {json.dumps(value)[:80]}.", pass_at)
    reason = value.get("reason")
    return Verdict(
        float(score), str(reason).strip()[:500] if reason else "The judge gave no reason.", pass_at
    )


def check_run(check: Mapping[str, Any], *, answer: str, expected: str) -> Verdict:
    """Score `answer` by `check` (already checked by `check_problem`; not a judge: `judge_verdict`)."""
    kind = check["kind"]
    target = str(check["value"]) if check.get("value") not in (None, "") else expected
    if kind == "exact":
        return _exact(answer, target, bool(check.get("ignore_case")))
    if kind == "contains":
        return _contains(answer, target, bool(check.get("ignore_case")))
    if kind == "regex":
        found = re.search(str(check["pattern"]), answer)
        if found:
            return Verdict(1.0, f"Matches at character {found.start() + 1}: {found.group(0)[:60]!r}.")
        return Verdict(0.0, "No match.")
    if kind == "json_schema":
        return _json_schema(answer, check["schema"])
    if kind == "json_path":
        return _json_path(answer, str(check["path"]), check.get("value", expected))
    if kind == "length":
        return _length(answer, check.get("min"), check.get("max"))
    return _numeric(answer, target, float(check.get("tolerance", 0)))


def _exact(answer: str, target: str, ignore_case: bool) -> Verdict:
    if not target:
        return Verdict(0.0, "Nothing to compare with: the item has no expected output.")
    a, b = answer.strip(), target.strip()
    if (a.casefold() == b.casefold()) if ignore_case else (a == b):
        return Verdict(1.0, "Equal to the expected output.")
    return Verdict(0.0, f"Differs from {b[:60]!r}.")


def _contains(answer: str, target: str, ignore_case: bool) -> Verdict:
    if not target:
        return Verdict(0.0, "Nothing to look for: the item has no expected output.")
    found = target.casefold() in answer.casefold() if ignore_case else target in answer
    return (
        Verdict(1.0, f"Contains {target[:60]!r}.")
        if found
        else Verdict(0.0, f"Does not contain {target[:60]!r}.")
    )


def _json_of(answer: str) -> tuple[Any, str]:
    text = answer.strip()
    if text.startswith("```"):  # a fenced block: its body
        text = text.strip("`").removeprefix("json").strip()
    try:
        return json.loads(text), ""
    except ValueError as exc:
        return None, f"Not JSON: {exc}."


def _json_schema(answer: str, schema: Any) -> Verdict:
    value, problem = _json_of(answer)
    if problem:
        return Verdict(0.0, problem)
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(value))
    if error is None:
        return Verdict(1.0, "Valid against the schema.")
    where = "/".join(str(part) for part in error.absolute_path) or "the top"
    return Verdict(0.0, f"Invalid at {where}: {error.message}.")


def _path_steps(path: str) -> list[str | int] | None:
    if not path.startswith("$"):
        return None
    steps: list[str | int] = []
    position = 1
    while position < len(path):
        match = _PATH_STEP.match(path, position)
        if match is None:
            return None
        name, index, quoted = match.groups()
        steps.append(int(index) if index is not None else (name if name is not None else quoted))
        position = match.end()
    return steps


def _json_path(answer: str, path: str, wanted: Any) -> Verdict:
    value, problem = _json_of(answer)
    if problem:
        return Verdict(0.0, problem)
    for step in _path_steps(path) or []:
        found = (isinstance(step, int) and isinstance(value, list) and step < len(value)) or (
            isinstance(step, str) and isinstance(value, dict) and step in value
        )
        if found:
            value = value[step]
        else:
            return Verdict(0.0, f"{path} is not in the answer.")
    if isinstance(wanted, str) and not isinstance(value, str):
        with contextlib.suppress(ValueError):  # an expected "42" or "true" is the JSON it spells
            wanted = json.loads(wanted)
    if value == wanted:
        return Verdict(1.0, f"{path} is {json.dumps(value)[:60]}.")
    return Verdict(0.0, f"{path} is {json.dumps(value)[:60]}, not {json.dumps(wanted)[:60]}.")


def _length(answer: str, low: int | None, high: int | None) -> Verdict:
    size = len(answer)
    if low is not None and size < low:
        return Verdict(size / low, f"{size} characters, under the minimum {low}.")
    if high is not None and size > high:
        return Verdict(
            max(0.0, 1 - (size - high) / high) if high else 0.0,
            f"{size} characters, over the maximum {high}.",
        )
    return Verdict(1.0, f"{size} characters, in range.")


def _numeric(answer: str, target: str, tolerance: float) -> Verdict:
    try:
        wanted = float(target.strip().replace(",", "."))
    except ValueError:
        return Verdict(0.0, f"The expected value {target[:40]!r} is not a number.")
    # The last number: an answer that works it out ("1 + 1 = 2") ends with its result.
    found = next(reversed(list(_NUMBER.finditer(answer))), None)
    if found is None:
        return Verdict(0.0, "The answer has no number.")
    got = float(found.group(0).replace(",", "."))
    distance = abs(got - wanted)
    if distance <= tolerance:
        return Verdict(1.0, f"{found.group(0)} is within {tolerance:g} of {wanted:g}.")
    # Linear from full marks at the tolerance down to 0 at ten times it (0 tolerance: exact only).
    span = 9 * tolerance
    score = max(0.0, 1 - (distance - tolerance) / span) if span else 0.0
    return Verdict(
        round(score, 4), f"{found.group(0)} is {distance:g} from {wanted:g} (tolerance {tolerance:g})."
    )
