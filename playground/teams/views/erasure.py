"""Erasing one end user from the team's Data page (issue 37): owners type the id, see what holds
it counted by kind, and confirm; anyone else is refused (403), another team is a 404."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.views.decorators.http import require_POST

from playground.accounts.models import Membership, Role
from playground.lib.web import HtmxHttpRequest, form_errors_add
from playground.teams.forms import EndUserEraseForm
from playground.teams.services.erasure import end_user_erase_by_owner, end_user_erasure_count
from playground.teams.views.page import redirect_done, team_page, team_view

ERASE = "erase"  # the value of `step` that the confirmation posts; anything else counts first

# What each count of `usage.erasure.end_user_erase` is, in the confirmation's words.
COUNTED = {
    "records": "request records of this end user: their text removed, the id replaced by a tombstone",
    "records_mentioning": "other request records that hold the id in their text or labels",
    "routing_seals": "sealed routing decisions rewritten (named in the seal chain and sealed again)",
    "rollup_rows": "hourly and daily cost rows by end user (renamed to the tombstone)",
    "chat_messages": "chat messages",
    "conversations": "conversation titles, system prompts and variables",
    "comparison_texts": "Compare turns and answers",
    "batch_items": "batch items (request, answer, error, reference)",
    "batches": "batch names and previews",
    "idempotent_answers": "answers kept for idempotent replay (deleted)",
    "dataset_items": "evaluation dataset items (copies of its requests emptied, the id replaced elsewhere)",
    "check_reasons": "evaluation verdicts' reasons",
}


@require_POST
@team_view(write=frozenset({Role.OWNER}))
def end_user_erase_view(request: HtmxHttpRequest, membership: Membership) -> HttpResponse:
    form = EndUserEraseForm(request.POST)
    counts: dict[str, int] | None = None
    if form.is_valid():
        end_user = form.cleaned_data["end_user"]
        try:
            if request.POST.get("step") == ERASE:
                erased = end_user_erase_by_owner(actor=membership, end_user=end_user)
                text = f"End user erased: {sum(erased.values())} places changed; costs and tokens kept."
                return redirect_done(request, text, "teams:data", membership.team_id)
            counts = end_user_erasure_count(actor=membership, end_user=end_user)
        except ValidationError as exc:
            form_errors_add(form, exc)
    rows = [(COUNTED.get(name, name.replace("_", " ")), n) for name, n in (counts or {}).items() if n]
    context = {
        "erase_form": form,
        "counted": rows,
        "total": sum((counts or {}).values()),
        "checked": counts is not None,
    }
    return team_page(
        request, membership, "teams/data_erase.html", context, status=200 if counts is not None else 400
    )
