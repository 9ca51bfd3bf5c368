"""`{{ answer|diff_against:expected }}`: the answer's word diff against the expected output
(`evals.diffs`), for `evals/_diff.html`."""

from __future__ import annotations

from django import template

from playground.evals.diffs import Diff, answer_diff

register = template.Library()


@register.filter
def diff_against(answer: str, expected: str) -> Diff | None:
    return answer_diff(expected or "", answer or "")
