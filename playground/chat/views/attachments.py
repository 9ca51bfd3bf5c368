"""Image attachments over HTTP: upload (htmx chips), remove, and the only way to see one.

There is no public media URL: `attachment_view` serves a stored image to members of the
conversation's team (any role) and answers 404 to everyone else, as for a conversation.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files.uploadhandler import FileUploadHandler, SkipFile
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_POST

from playground.chat.domain.attachments import attachment_bytes, attachments_pending, image_refusal
from playground.chat.models import Conversation
from playground.chat.presenters.messages import image_view
from playground.chat.selectors import attachment_get
from playground.chat.services.conversations import ConversationNotFound
from playground.chat.services.uploads import attachment_remove, attachment_upload
from playground.chat.views.lookups import found_or_404
from playground.lib.web import HtmxHttpRequest

UPLOAD_FIELD = "images"


class SizeLimitHandler(FileUploadHandler):
    """Stops reading a file as soon as it passes `ATTACHMENT_MAX_BYTES` (it is skipped, and
    named in `too_large`), so an oversized upload is never written out whole."""

    def __init__(self, request: Any = None, *, limit: int) -> None:
        super().__init__(request)
        self.limit = limit
        self.received = 0
        self.too_large: list[str] = []

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        self.received = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.received += len(raw_data)
        if self.received > self.limit:
            self.too_large.append(self.file_name or "")
            raise SkipFile
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None  # the next handler (memory or temporary file) keeps the file


@csrf_exempt  # only to install the upload handler before the body is read; checked below
@login_required
@require_POST
def attachment_upload_view(request: HtmxHttpRequest, conversation_id: int) -> HttpResponse:
    limiter = SizeLimitHandler(request, limit=settings.ATTACHMENT_MAX_BYTES)
    request.upload_handlers.insert(0, limiter)
    return _upload(request, conversation_id, limiter)


@csrf_protect
def _upload(request: HtmxHttpRequest, conversation_id: int, limiter: SizeLimitHandler) -> HttpResponse:
    try:
        result = attachment_upload(
            user=request.user,
            conversation_id=conversation_id,
            uploads=request.FILES.getlist(UPLOAD_FIELD),
            too_large=limiter.too_large,
        )
    except ConversationNotFound:
        raise Http404("No such conversation.") from None
    except PermissionDenied as exc:
        return _refused(request, str(exc), status=403)
    if not result.accepted and not result.refused:
        return _refused(request, "Choose one or more images first.")
    context = {
        "images": [image_view(attachment) for attachment in result.accepted],
        "refused": result.refused,
    }
    return render(request, "chat/attachments.html#upload_result", context)


@login_required
@require_POST
def attachment_remove_view(request: HtmxHttpRequest, attachment_id: int) -> HttpResponse:
    try:
        attachment_remove(user=request.user, attachment_id=attachment_id)
    except ConversationNotFound:
        raise Http404("No such image.") from None
    except PermissionDenied as exc:
        return _refused(request, str(exc), status=403)
    except ValidationError as exc:
        return _refused(request, " ".join(exc.messages))
    return HttpResponse("")  # htmx swaps the chip away


@login_required
@require_GET
def attachment_view(request: HtmxHttpRequest, attachment_id: int) -> HttpResponse:
    attachment = found_or_404(attachment_get(user=request.user, attachment_id=attachment_id), "image")
    data = attachment_bytes(attachment)  # at most 2,048 px a side: read whole, served at once
    if data is None:
        raise Http404("This image is no longer stored.")
    response = HttpResponse(data, content_type=attachment.content_type)
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, max-age=3600"
    response["Content-Disposition"] = (
        f'inline; filename="image-{attachment.pk}.{_extension(attachment.content_type)}"'
    )
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response


def attachments_context(conversation: Conversation, *, can_send: bool) -> dict[str, Any]:
    """What the composer needs: the images waiting to be sent, and why attaching is off."""
    refusal = image_refusal(model_id=conversation.model_id) if can_send else ""
    pending = attachments_pending(conversation=conversation) if can_send and not refusal else []
    return {
        "pending_images": [image_view(attachment, number=n) for n, attachment in enumerate(pending, 1)],
        "image_refusal": refusal,
        "max_images": settings.ATTACHMENTS_PER_TURN,
        "max_image_mb": f"{settings.ATTACHMENT_MAX_BYTES / (1024 * 1024):g}",
    }


def _refused(request: HttpRequest, message: str, *, status: int = 200) -> HttpResponse:
    """The notice beside the attach button (200 so that htmx swaps it in, unless forbidden)."""
    context = {"refused": [("", message)], "images": []}
    return render(request, "chat/attachments.html#upload_result", context, status=status)


def _extension(content_type: str) -> str:
    return {"image/jpeg": "jpg"}.get(content_type, content_type.removeprefix("image/"))
