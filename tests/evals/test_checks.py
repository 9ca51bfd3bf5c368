"""Each check on answers whose verdict is known: the right answer scores 1, a wrong one less."""

from __future__ import annotations

from typing import Any

import pytest

from playground.evals.checks import check_label, check_problem, check_run, judge_messages, judge_verdict

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


@pytest.mark.parametrize(
    ("check", "answer", "expected", "score"),
    [
        ({"kind": "exact"}, " Paris ", "Paris", 1.0),
        ({"kind": "exact"}, "paris", "Paris", 0.0),
        ({"kind": "exact", "ignore_case": True}, "paris", "Paris", 1.0),
        ({"kind": "exact", "value": "Rome"}, "Paris", "Paris", 0.0),
        ({"kind": "contains"}, "The capital is Paris.", "Paris", 1.0),
        ({"kind": "contains", "value": "refund"}, "We cannot help.", "", 0.0),
        ({"kind": "contains", "value": "REFUND", "ignore_case": True}, "a refund", "", 1.0),
        ({"kind": "regex", "pattern": r"^\d{3}-\d{4}$"}, "555-1234", "", 1.0),
        ({"kind": "regex", "pattern": r"^\d{3}-\d{4}$"}, "call 555-1234", "", 0.0),
        ({"kind": "json_schema", "schema": SCHEMA}, '{"n": 3}', "", 1.0),
        ({"kind": "json_schema", "schema": SCHEMA}, '{"n": "3"}', "", 0.0),
        ({"kind": "json_schema", "schema": SCHEMA}, "not json", "", 0.0),
        ({"kind": "json_schema", "schema": SCHEMA}, '```json\n{"n": 3}\n```', "", 1.0),
        ({"kind": "json_path", "path": "$.a.b[1]", "value": 7}, '{"a": {"b": [1, 7]}}', "", 1.0),
        ({"kind": "json_path", "path": "$.a.b[1]", "value": 8}, '{"a": {"b": [1, 7]}}', "", 0.0),
        ({"kind": "json_path", "path": "$.a.c"}, '{"a": {"b": 1}}', "1", 0.0),
        ({"kind": "json_path", "path": "$.total"}, '{"total": 42}', "42", 1.0),
        ({"kind": "length", "min": 2, "max": 10}, "hello", "", 1.0),
        ({"kind": "length", "min": 10}, "hello", "", 0.5),
        ({"kind": "length", "max": 4}, "hello", "", 0.75),
        ({"kind": "numeric", "tolerance": 0.5}, "About 3.2 km", "3", 1.0),
        ({"kind": "numeric", "tolerance": 1}, "It is 6.5.", "1", 0.5),
        ({"kind": "numeric", "tolerance": 1}, "It is 100.", "1", 0.0),
        ({"kind": "numeric"}, "no number here", "1", 0.0),
        ({"kind": "numeric"}, "1 + 1 = 2", "2", 1.0),  # the last number is the result
        ({"kind": "numeric"}, "4", "four", 0.0),
    ],
)
def test_a_check_scores_a_known_answer(
    check: dict[str, Any], answer: str, expected: str, score: float
) -> None:
    assert check_problem(check) == ""
    verdict = check_run(check, answer=answer, expected=expected)
    assert verdict.score == pytest.approx(score)
    assert verdict.reason
    assert verdict.passed is (score == 1.0)


def test_a_check_without_anything_to_compare_fails_and_says_why() -> None:
    verdict = check_run({"kind": "exact"}, answer="Paris", expected="")
    assert verdict.score == 0.0
    assert "no expected output" in verdict.reason


@pytest.mark.parametrize(
    ("check", "problem"),
    [
        ({"kind": "soundex"}, "Each check needs a kind"),
        ({"kind": "regex", "pattern": "(unclosed"}, "does not compile"),
        ({"kind": "regex"}, "needs a pattern"),
        ({"kind": "json_schema", "schema": {"type": "nope"}}, "not valid"),
        ({"kind": "json_schema"}, "needs a schema"),
        ({"kind": "json_path", "path": "a.b"}, "A JSON path looks like"),
        ({"kind": "length"}, "minimum and/or a maximum"),
        ({"kind": "numeric", "tolerance": -1}, "tolerance"),
        ("contains", "Each check needs a kind"),
    ],
)
def test_a_check_that_cannot_run_is_refused_with_its_reason(check: Any, problem: str) -> None:
    assert problem in check_problem(check)


def test_a_check_is_labelled_by_its_name_or_its_kind() -> None:
    assert check_label({"kind": "contains", "value": "refund"}) == "Contains refund"
    assert check_label({"kind": "length", "max": 200}) == "Length in range 0-200"
    assert check_label({"kind": "exact", "name": "Same answer"}) == "Same answer"


JUDGE = {
    "kind": "judge",
    "prompt": "Q: {{input}} A: {{output}} E: {{ expected }}",
    "connection": 1,
    "model": "m",
}


@pytest.mark.parametrize(
    ("text", "score", "reason"),
    [
        ('{"score": 1, "reason": "Right."}', 1.0, "Right."),
        ('Sure!\n```json\n{"score": 0.25, "reason": "Half wrong."}\n```', 0.25, "Half wrong."),
        ('{"score": 0.7}', 0.7, "The judge gave no reason."),
        ("It looks fine to me.", None, "The judge did not answer JSON"),
        ('{"score": "high", "reason": "x"}', None, "The judge gave no score from 0 to 1"),
        ('{"score": 7, "reason": "x"}', None, "The judge gave no score from 0 to 1"),
        ('{"score": true, "reason": "x"}', None, "The judge gave no score from 0 to 1"),
        ("[0.5]", None, "The judge gave no score from 0 to 1"),
        ("", None, "The judge did not answer JSON"),
    ],
)
def test_a_judges_answer_is_read_robustly(text: str, score: float | None, reason: str) -> None:
    verdict = judge_verdict(JUDGE, text)
    assert verdict.score == score and verdict.reason.startswith(reason)
    assert verdict.passed is (score is not None and score >= 0.5)


def test_a_judges_prompt_is_filled_and_asks_for_json() -> None:
    [message] = judge_messages(JUDGE, input_text="2+2?", answer="4", expected="4")
    assert message["content"].startswith("Q: 2+2? A: 4 E: 4") and '"score"' in message["content"]


@pytest.mark.parametrize(
    ("check", "problem"),
    [
        ({**JUDGE, "prompt": "Rate {{input}}"}, "{{output}}"),
        ({**JUDGE, "connection": "one"}, "a connection"),
        ({**JUDGE, "model": ""}, "a model"),
        ({**JUDGE, "pass_at": 2}, "pass_at"),
    ],
)
def test_a_judge_that_cannot_run_is_refused(check: dict[str, Any], problem: str) -> None:
    assert problem in check_problem(check)
    assert check_problem(JUDGE) == ""
