""" "View code": the next request of a conversation, or a past one, as code to run elsewhere.

The request is the playground's own: for the next turn the one Send would make now
(`turn_request_build`), its body as the adapter would send it (`body_as_sent`); for a past
turn the body its usage record kept. `providers.code_samples` writes the code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.core.exceptions import ValidationError

from playground.chat.models import Conversation
from playground.chat.services.history import CURRENT_LEAF
from playground.chat.services.turns import attachments_to_send, turn_request_build
from playground.providers.adapters import adapter_for
from playground.providers.code_samples import (
    CodeTarget,
    SentRequest,
    Snippet,
    TargetKind,
    code_snippets,
    direct_target,
    gateway_target,
)
from playground.providers.models import ProviderConnection
from playground.usage.models import UsageRecord

# What the next request says in place of a message when the composer is empty.
EMPTY_DRAFT = "(your next message)"
TARGET_LABELS = {TargetKind.DIRECT: "Connection directly", TargetKind.GATEWAY: "This app's gateway"}


@dataclass(frozen=True)
class RequestCode:
    target: TargetKind
    snippets: list[Snippet]
    problem: str = ""  # why there is no code ("" when there is)

    @property
    def targets(self) -> list[tuple[str, str, bool]]:
        """(value, label, chosen) of each target, for the switch."""
        return [(kind.value, label, kind == self.target) for kind, label in TARGET_LABELS.items()]


def target_parse(value: str) -> TargetKind:
    """The target a request asked for; the connection itself unless it said the gateway."""
    return TargetKind.GATEWAY if value == TargetKind.GATEWAY else TargetKind.DIRECT


def next_request_code(
    *,
    conversation: Conversation,
    text: str,
    attachment_ids: Sequence[int],
    target: TargetKind,
    origin: str,
    after: int = CURRENT_LEAF,
) -> RequestCode:
    """The code of the request Send would make now with the draft `text` and images, after the
    message `after` (the last one on the page).

    Blocking (`adapter_for` resolves the connection's host). `origin` is this app's address.
    """
    connection = conversation.connection
    if connection is None:
        return RequestCode(
            target, [], "This conversation's connection was deleted: there is nothing to send to."
        )
    try:
        attachments = attachments_to_send(conversation, attachment_ids)
        request = turn_request_build(
            conversation=conversation, text=text.strip() or EMPTY_DRAFT, attachments=attachments, after=after
        )
        adapter = adapter_for(connection)
    except ValidationError as exc:
        return RequestCode(target, [], " ".join(exc.messages))
    sent = SentRequest(
        model=request.model, body=adapter.body_as_sent(request), affinity_key=request.affinity_key
    )
    code_target = direct_target(connection, adapter) if target == TargetKind.DIRECT else None
    return _code(connection, sent, target, origin, code_target)


def past_request_code(*, record: UsageRecord, target: TargetKind, origin: str) -> RequestCode:
    """The code that sends again what the record's request sent (its body as kept: secrets and
    images redacted), to the connection as it is now set up."""
    connection = record.connection
    if connection is None:
        return RequestCode(target, [], "The connection this request went to was deleted.")
    if not record.request_body:
        return RequestCode(target, [], "This request's body was not kept, so there is no code to show.")
    sent = SentRequest(model=record.model_id, body=record.request_body, affinity_key=record.affinity_key)
    code_target = None
    if target == TargetKind.DIRECT:
        try:
            code_target = direct_target(connection, adapter_for(connection))
        except ValidationError as exc:
            return RequestCode(target, [], " ".join(exc.messages))
    return _code(connection, sent, target, origin, code_target)


def _code(
    connection: ProviderConnection,
    sent: SentRequest,
    target: TargetKind,
    origin: str,
    direct: CodeTarget | None,
) -> RequestCode:
    code_target = direct or gateway_target(connection, origin=origin)
    return RequestCode(target, code_snippets(target=code_target, sent=sent))
