"""The record page's scores: who scored the request and how, and the signed-in person's own
score, given, changed or taken back in place (htmx swaps the `scores` partial).

Any member of the record's team may score it (a score costs nothing; a viewer reviewing answers
is who scores most); the record is looked up among the user's teams only, so another team's is
a 404 (`request_log.usage_record_get`).
"""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from playground.analytics.selectors.request_log import usage_record_get
from playground.lib.web import HtmxHttpRequest, form_errors_add, refusal
from playground.usage.models import COMMENT_MAX, RATING_MAX, RATING_MIN, Score, ScoreKind, UsageRecord
from playground.usage.scores import record_scores, score_delete_by_person, score_input, score_put_by_person

# The form's one choice: a thumb or a rating, as (kind, value).
CHOICES: dict[str, tuple[str, int]] = {
    "up": (ScoreKind.THUMBS, 1),
    "down": (ScoreKind.THUMBS, 0),
    **{str(n): (ScoreKind.RATING, n) for n in range(RATING_MIN, RATING_MAX + 1)},
}
LABELS = {
    "up": "▲ Thumbs up",
    "down": "▼ Thumbs down",
    **{str(n): f"{n} ★" for n in range(RATING_MIN, RATING_MAX + 1)},
}


class ScoreForm(forms.Form):
    score = forms.ChoiceField(
        choices=list(LABELS.items()),
        error_messages={"required": "Pick a thumb or a rating."},
    )
    comment = forms.CharField(
        required=False,
        max_length=COMMENT_MAX,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "Why? (optional)"}),
    )


def score_form_for(score: Score | None) -> ScoreForm:
    """The person's form, showing their score when they have one."""
    if score is None:
        return ScoreForm()
    choice = next(
        name for name, (kind, value) in CHOICES.items() if (kind, value) == (score.kind, score.value)
    )
    return ScoreForm(initial={"score": choice, "comment": score.comment})


def scores_context(*, record: UsageRecord, user_id: int, form: ScoreForm | None = None) -> dict[str, Any]:
    scores = record_scores(record=record)
    mine = next((s for s in scores if s.origin == "person" and s.user_id == user_id), None)
    return {
        "record": record,
        "scores": scores,
        "my_score": mine,
        "score_form": form if form is not None else score_form_for(mine),
    }


@login_required
@require_POST
def record_score_view(request: HtmxHttpRequest, request_id: uuid.UUID) -> HttpResponse:
    """Give or change the person's score (`action=remove`: take it back); the scores again."""
    record = usage_record_get(user=request.user, request_id=str(request_id))
    if record is None:
        raise Http404("No such usage record.")
    refused = None if request.POST.get("action") == "remove" else _score_saved(request, record)
    if refused is None and request.POST.get("action") == "remove":
        score_delete_by_person(user_id=request.user.pk, record=record)
    if not request.htmx:  # the page works without scripts too
        if refused is not None:
            return refusal(request, "; ".join(" ".join(map(str, m)) for m in refused.errors.values()))
        return redirect("analytics:record-detail", request_id=record.request_id)
    # A form with errors is answered 200 with the errors on it: htmx swaps only 2xx answers.
    context = scores_context(record=record, user_id=request.user.pk, form=refused)
    return render(request, "analytics/_scores.html", context)


def _score_saved(request: HtmxHttpRequest, record: UsageRecord) -> ScoreForm | None:
    """Save the posted score: None when saved, else the form with its errors."""
    form = ScoreForm(request.POST)
    if not form.is_valid():
        return form
    kind, value = CHOICES[form.cleaned_data["score"]]
    try:
        given = score_input(kind=kind, value=value, comment=form.cleaned_data["comment"])
    except ValidationError as error:
        form_errors_add(form, error)
        return form
    score_put_by_person(user_id=request.user.pk, record=record, given=given)
    return None
