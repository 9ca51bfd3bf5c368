"""Images uploaded for a conversation's next message: checked and stored, or removed before they are sent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from playground.accounts.permissions import require_run_role
from playground.chat.domain.attachments import (
    ImageRefused,
    attachment_discard,
    attachment_store,
    attachments_pending,
    image_clean,
    image_refusal,
    read_limited,
    too_large_message,
    upload_name,
)
from playground.chat.models import Attachment
from playground.chat.selectors import attachment_get
from playground.chat.services.conversations import ConversationNotFound, conversation_for_run


@dataclass(frozen=True)
class UploadResult:
    accepted: list[Attachment]
    refused: list[tuple[str, str]]  # (file name, why)


def attachment_upload(
    *, user: User, conversation_id: int, uploads: Sequence[Any], too_large: Sequence[str] = ()
) -> UploadResult:
    """Check, re-encode and store images for the conversation's next message.

    Each file is judged on its own: the good ones are kept, each refused one is named with
    the reason (`too_large`: names the upload handler already stopped reading). Nothing is
    stored for a model that does not read images, or beyond `ATTACHMENTS_PER_TURN` waiting.
    Raises `ConversationNotFound` or `PermissionDenied`.
    """
    conversation = conversation_for_run(user=user, conversation_id=conversation_id)
    limit_bytes = settings.ATTACHMENT_MAX_BYTES
    refused = [(upload_name(name), too_large_message(limit_bytes)) for name in too_large]
    refusal = image_refusal(model_id=conversation.model_id)
    if refusal:
        return UploadResult([], refused + [(upload_name(upload.name), refusal) for upload in uploads])
    room = settings.ATTACHMENTS_PER_TURN - len(attachments_pending(conversation=conversation))
    accepted: list[Attachment] = []
    for upload in uploads:
        name = upload_name(upload.name)
        if len(accepted) >= room:
            refused.append((name, f"A message can carry at most {settings.ATTACHMENTS_PER_TURN} images."))
            continue
        try:
            image = image_clean(read_limited(upload, limit=limit_bytes))
        except ImageRefused as exc:
            refused.append((name, " ".join(exc.messages)))
            continue
        accepted.append(attachment_store(conversation=conversation, image=image))
    return UploadResult(accepted, refused)


def attachment_remove(*, user: User, attachment_id: int) -> None:
    """Delete an image that was uploaded but not sent. Raises `ConversationNotFound` (404)
    for another team's image, `ValidationError` for one already sent."""
    attachment = attachment_get(user=user, attachment_id=attachment_id)
    if attachment is None:
        raise ConversationNotFound(attachment_id)
    require_run_role(user=user, team_id=attachment.conversation.team_id)
    if attachment.message_id is not None:
        raise ValidationError("This image was sent with a message; it stays with it.")
    attachment_discard(attachment)
