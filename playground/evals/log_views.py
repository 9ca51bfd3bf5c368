"""Add requests from the request log to a dataset: the log's selection arrives here (a GET with
the team and the request ids), each request is shown with the item it makes or why it is
refused, and the user picks one of the team's datasets or names a new one (a POST).

The team must be one of the user's (else 404), and every record is looked up in that team only
(`services.from_records`), so another team's request id is refused like an unknown one.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from playground.accounts.models import Team
from playground.accounts.permissions import user_can_run
from playground.accounts.selectors import team_list_for_user
from playground.evals.models import Dataset
from playground.evals.selectors import query_id
from playground.evals.services.datasets import DatasetNotFound
from playground.evals.services.from_records import dataset_add_records, record_lines
from playground.lib.web import HtmxHttpRequest, form_errors_add

NEW = "new"


class AddFromLogForm(forms.Form):
    dataset = forms.ChoiceField(label="Add to")
    name = forms.CharField(label="New dataset's name", max_length=200, required=False)

    def __init__(self, *args: Any, datasets: list[Dataset], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [(str(dataset.pk), f"{dataset.name} (v{dataset.version})") for dataset in datasets]
        field = self.fields["dataset"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [*choices, (NEW, "A new dataset")]
        field.initial = choices[0][0] if choices else NEW

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("dataset") == NEW and not (cleaned.get("name") or "").strip():
            self.add_error("name", "Name the new dataset.")
        return cleaned


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def add_from_log_view(request: HtmxHttpRequest) -> HttpResponse:
    data = request.POST if request.method == "POST" else request.GET
    team = _team_or_404(request, data.get("team", ""))
    request_ids = data.getlist("record")
    datasets = list(Dataset.objects.filter(team=team).order_by("name"))
    form = AddFromLogForm(request.POST or None, datasets=datasets)
    context: dict[str, Any] = {
        "team": team,
        "form": form,
        "can_run": user_can_run(user=request.user, team_id=team.pk),
        "back": f"{reverse('analytics:log')}?team={team.pk}",
    }
    status = 200
    if request.method == "POST" and form.is_valid():
        choice = form.cleaned_data["dataset"]
        try:
            added = dataset_add_records(
                user=request.user,
                team_id=team.pk,
                request_ids=request_ids,
                dataset_id=None if choice == NEW else int(choice),
                new_name=form.cleaned_data["name"],
            )
        except DatasetNotFound:
            raise Http404 from None
        except ValidationError as exc:
            form_errors_add(form, exc)
            status = 400
        else:
            context.update(added=added, lines=added.lines)
            return render(request, "evals/from_log.html", context)
    elif request.method == "POST":
        status = 400
    try:
        context["lines"] = record_lines(team_id=team.pk, request_ids=request_ids)
    except ValidationError as exc:
        context["lines"] = []
        form_errors_add(form, exc)
        status = 400
    return render(request, "evals/from_log.html", context, status=status)


def _team_or_404(request: HtmxHttpRequest, team_id: str) -> Team:
    pk = query_id(team_id)
    team = team_list_for_user(user=request.user).filter(pk=pk).first() if pk else None
    if team is None:
        raise Http404
    return team
