"""Not a page: the lookups pages start with. A selector scoped to the user's teams answers None
for another team's object as for a missing one, and the page answers 404 for both."""

from __future__ import annotations

from django.http import Http404, HttpRequest

from playground.chat.models import Conversation
from playground.chat.selectors import conversation_get


def conversation_or_404(request: HttpRequest, conversation_id: int | str) -> Conversation:
    """The conversation if one of the user's teams owns it; another team's (or an id that is not
    a number, from a query string) is a 404, as a missing one."""
    if isinstance(conversation_id, str):
        if not (conversation_id.isascii() and conversation_id.isdigit()):
            raise Http404("No such conversation.")
        conversation_id = int(conversation_id)
    return found_or_404(conversation_get(user=request.user, conversation_id=conversation_id), "conversation")


def found_or_404[Found](found: Found | None, what: str) -> Found:
    """What a scoped selector found; None (another team's, or none) is a 404."""
    if found is None:
        raise Http404(f"No such {what}.")
    return found
