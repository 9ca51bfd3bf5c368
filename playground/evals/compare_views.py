"""Compare two experiments: pick A (any started experiment of the user's teams), then B among
the experiments on A's dataset version only; the page shows both side by side (`compare`).

Both lookups go through the team-scoped selector, so another team's experiment is a 404, and two
experiments on different dataset versions are refused with the reason.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from playground.evals.compare import (
    NOT_COMPARABLE,
    comparable_experiments,
    item_pairs,
    same_items,
    target_pairs,
)
from playground.evals.models import Experiment
from playground.evals.results import ROWS_PER_PAGE
from playground.evals.selectors import experiment_get, experiment_list, query_id
from playground.lib.web import HtmxHttpRequest


@never_cache
@login_required
@require_GET
def compare_view(request: HtmxHttpRequest) -> HttpResponse:
    a = _experiment_or_404(request, request.GET.get("a", ""))
    b = _experiment_or_404(request, request.GET.get("b", ""))
    context: dict[str, Any] = {"a": a, "b": b}
    if a is None:
        context["choices"] = experiment_list(user=request.user).filter(started_at__isnull=False)[:100]
        return render(request, "evals/compare.html", context)
    if b is None or not same_items(a, b):
        context["choices"] = comparable_experiments(user=request.user, experiment=a)[:100]
        context["refused"] = NOT_COMPARABLE if b is not None else ""
        return render(request, "evals/compare.html", context, status=400 if b is not None else 200)
    pages = Paginator(range(a.item_count), ROWS_PER_PAGE).get_page(request.GET.get("page"))
    start = (pages.number - 1) * ROWS_PER_PAGE
    pairs = target_pairs(a, b)
    context.update(
        pairs=pairs,
        items=item_pairs(a, b, start=start, stop=start + ROWS_PER_PAGE),
        pages=pages,
        columns=len(pairs),
    )
    return render(request, "evals/compare.html", context)


def _experiment_or_404(request: HtmxHttpRequest, value: str) -> Experiment | None:
    if not value:
        return None
    experiment_id = query_id(value)
    experiment = experiment_get(user=request.user, experiment_id=experiment_id) if experiment_id else None
    if experiment is None:
        raise Http404
    return experiment
