"""Not a page: the lookup every conversation page starts with, scoped to the user's teams."""

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
    conversation = conversation_get(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation.")
    return conversation
