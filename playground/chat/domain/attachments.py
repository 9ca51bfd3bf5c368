"""Image attachments: checked by their content, re-encoded, stored out of public reach.

An upload is judged by its bytes, never by its name or declared type. Pillow opens it with
only PNG, JPEG, WebP and GIF enabled; SVG, PDF and other formats are refused with a message
that says why. The canvas size is read from the header and refused above
`ATTACHMENT_MAX_PIXELS` before anything is decoded (a decompression bomb declares a huge
canvas in a few kilobytes), and a file over `ATTACHMENT_MAX_BYTES` is refused while it is
read. An accepted image is decoded (the first frame of a GIF or animated WebP), turned
upright by its EXIF orientation, downscaled to `ATTACHMENT_MAX_SIDE` and re-encoded with no
metadata at all: EXIF (camera, GPS position), XMP, ICC and text chunks are dropped.

Files are stored through Django's storage API (`MEDIA_ROOT`, with no public URL) and served
only by the attachment view, to members of the conversation's team. An attachment belongs
to its conversation until a turn sends it (`message` is then set).

The functions here take a conversation the caller has already checked access to; the
user-facing actions are services: upload and remove in `chat.services.uploads`, send in
`chat.services.turns`.
"""

from __future__ import annotations

import hashlib
import io
import logging
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import IO, Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.db import transaction
from django.utils import timezone
from PIL import Image, ImageOps, UnidentifiedImageError

from playground.catalog.selectors import catalog_model_serving
from playground.chat.models import Attachment, Conversation, Message
from playground.providers.images import image_part, text_part

logger = logging.getLogger(__name__)

ACCEPTED = "PNG, JPEG, WebP or GIF"
# Pillow format -> (stored format, content type, extension). A GIF keeps its first frame only,
# stored as PNG (lossless, and every vision model reads it).
OUTPUTS = {
    "PNG": ("PNG", "image/png", "png"),
    "GIF": ("PNG", "image/png", "png"),
    "JPEG": ("JPEG", "image/jpeg", "jpg"),
    "WEBP": ("WEBP", "image/webp", "webp"),
}
# Formats we recognise only to say what they are when we refuse them.
OTHER_SIGNATURES: tuple[tuple[bytes, int, str], ...] = (
    (b"BM", 0, "BMP"),
    (b"II*\x00", 0, "TIFF"),
    (b"MM\x00*", 0, "TIFF"),
    (b"\x00\x00\x01\x00", 0, "ICO"),
    (b"ftypheic", 4, "HEIC"),
    (b"ftypheix", 4, "HEIC"),
    (b"ftypmif1", 4, "HEIF"),
    (b"ftypavif", 4, "AVIF"),
    (b"8BPS", 0, "Photoshop (PSD)"),
)
LOAD_ERRORS = (OSError, SyntaxError, ValueError, EOFError, IndexError, TypeError, MemoryError)
NAME_CHARS = 80


class ImageRefused(ValidationError):
    """An upload that is not an image we accept; the message says why."""


@dataclass(frozen=True)
class CleanImage:
    data: bytes
    content_type: str
    extension: str
    width: int
    height: int


# --- checking and re-encoding ------------------------------------------------------------


def read_limited(file: IO[bytes] | Any, *, limit: int) -> bytes:
    """The whole file, refused as soon as more than `limit` bytes have been read."""
    declared = getattr(file, "size", None)
    if isinstance(declared, int) and declared > limit:
        raise ImageRefused(too_large_message(limit))
    chunks: list[bytes] = []
    total = 0
    pieces: Iterable[bytes] = (
        file.chunks() if hasattr(file, "chunks") else iter(lambda: file.read(64 * 1024), b"")
    )
    for chunk in pieces:
        total += len(chunk)
        if total > limit:
            raise ImageRefused(too_large_message(limit))
        chunks.append(chunk)
    return b"".join(chunks)


def too_large_message(limit: int) -> str:
    return f"It is larger than {limit / (1024 * 1024):g} MB, the limit for an image."


def image_clean(data: bytes, *, max_side: int | None = None, max_pixels: int | None = None) -> CleanImage:
    """`data` checked as an image by its content, then decoded, downscaled and re-encoded.

    Raises `ImageRefused` with the reason for anything that is not a PNG, JPEG, WebP or GIF
    we can decode within the limits.
    """
    max_side = max_side or settings.ATTACHMENT_MAX_SIDE
    max_pixels = max_pixels or settings.ATTACHMENT_MAX_PIXELS
    if not data:
        raise ImageRefused("The file is empty.")
    try:
        image = Image.open(io.BytesIO(data), formats=list(OUTPUTS))  # reads the header only
    except Image.DecompressionBombError:
        raise ImageRefused(_bomb_message(max_pixels)) from None
    except UnidentifiedImageError:
        raise ImageRefused(_not_accepted_message(data)) from None
    except LOAD_ERRORS:
        raise ImageRefused(_damaged_message()) from None
    with image:
        source_format = image.format or ""
        width, height = image.size
        if width * height > max_pixels:
            raise ImageRefused(_bomb_message(max_pixels, width=width, height=height))
        try:
            image.seek(0)  # a GIF's or an animated WebP's first frame
            if source_format == "JPEG":
                image.draft(image.mode, (max_side, max_side))  # decode at a reduced scale
            image.load()
            clean = _prepared(image, source_format=source_format, max_side=max_side)
        except Image.DecompressionBombError:
            raise ImageRefused(_bomb_message(max_pixels)) from None
        except LOAD_ERRORS:
            raise ImageRefused(_damaged_message()) from None
    stored_format, content_type, extension = OUTPUTS[source_format]
    out = io.BytesIO()
    clean.save(out, format=stored_format, **_save_options(stored_format))
    return CleanImage(
        data=out.getvalue(),
        content_type=content_type,
        extension=extension,
        width=clean.width,
        height=clean.height,
    )


def _prepared(image: Image.Image, *, source_format: str, max_side: int) -> Image.Image:
    """Upright, in a mode the output format takes, downscaled, and with no metadata."""
    upright = ImageOps.exif_transpose(image) or image
    mode = upright.mode
    has_alpha = "A" in mode or "transparency" in upright.info
    if source_format == "JPEG":
        wanted = mode if mode in ("L", "RGB") else "RGB"
    elif mode in ("L", "RGB", "RGBA", "LA") and source_format != "WEBP":
        wanted = mode
    else:
        wanted = "RGBA" if has_alpha else "RGB"
    converted = upright.convert(wanted) if mode != wanted else upright.copy()
    converted.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    converted.info = {}  # no EXIF, GPS, XMP, ICC or text chunk reaches the saved file
    return converted


def _save_options(stored_format: str) -> dict[str, Any]:
    if stored_format == "JPEG":
        return {"quality": 90}
    if stored_format == "WEBP":
        return {"quality": 90, "method": 4}
    return {}


def _bomb_message(max_pixels: int, *, width: int = 0, height: int = 0) -> str:
    size = f" ({width:,} x {height:,} pixels)" if width and height else ""
    return (
        f"Its canvas is too large{size}: at most {max_pixels / 1_000_000:g} megapixels are accepted, "
        "checked before decoding (a small file with a huge canvas is a decompression bomb)."
    )


def _damaged_message() -> str:
    return "It looks like an image but cannot be decoded: the file is truncated or damaged."


def _not_accepted_message(data: bytes) -> str:
    head = data[:4096]
    text = head.decode("utf-8", "replace").lstrip("\ufeff \t\r\n").lower()
    if b"%PDF-" in data[:1024]:
        return f"It is a PDF document, not an image. Export the page you need as {ACCEPTED}."
    if "<svg" in text or (text.startswith("<?xml") and "svg" in text):
        return (
            "It is an SVG drawing: vector images can carry scripts and Workers AI refuses them. "
            f"Export it as {ACCEPTED}."
        )
    for signature, offset, name in OTHER_SIGNATURES:
        if head[offset : offset + len(signature)] == signature:
            return f"It is a {name} image; only {ACCEPTED} images are accepted."
    if _looks_like_text(head):
        return f"It is a text file, whatever its name says: only {ACCEPTED} images are accepted."
    return f"Its content is not a {ACCEPTED} image, whatever its name says."


def _looks_like_text(head: bytes) -> bool:
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\x00" not in head


# --- the capability gate -----------------------------------------------------------------


def image_refusal(*, model_id: str) -> str:
    """Why images cannot be sent to `model_id`, or "" when the model reads them.

    The catalogue's `supports_vision` decides; a model the catalogue does not know is not
    sent images (the playground cannot tell what it does with them).
    """
    model = catalog_model_serving(model_id=model_id, day=timezone.now().date())
    if model is None:
        return (
            f"The catalogue does not list {model_id}, so the playground cannot tell whether it reads "
            "images: images are off for it."
        )
    if not model.supports_vision:
        return f"{model.display_name} reads text only: it cannot be sent images."
    return ""


# --- storing, linking and sending ---------------------------------------------------------


def attachment_store(*, conversation: Conversation, image: CleanImage) -> Attachment:
    """Save the re-encoded image through the storage API, unsent (message=None)."""
    attachment = Attachment(
        conversation=conversation,
        sha256=hashlib.sha256(image.data).hexdigest(),
        content_type=image.content_type,
        width=image.width,
        height=image.height,
        size_bytes=len(image.data),
    )
    attachment.file.save(f"{uuid.uuid4().hex}.{image.extension}", ContentFile(image.data), save=False)
    try:
        attachment.save()
    except BaseException:
        attachment.file.delete(save=False)
        raise
    return attachment


def attachment_discard(attachment: Attachment) -> None:
    """Delete the row and then its file (a file left behind is harmless; a row without one is not)."""
    storage, name = attachment.file.storage, attachment.file.name
    attachment.delete()
    if name:
        transaction.on_commit(lambda: storage.delete(name))


def attachment_copy(original: Attachment, *, message: Message) -> Attachment:
    """A copy of `original` (its file too) for `message`, which may be in another conversation:
    an edited question or a forked conversation keeps its images, and deleting one copy never
    takes the other's file."""
    with original.file.open("rb") as source:
        data = source.read()
    copy = Attachment(
        message=message,
        conversation_id=message.conversation_id,
        sha256=original.sha256,
        content_type=original.content_type,
        width=original.width,
        height=original.height,
        size_bytes=original.size_bytes,
    )
    extension = (original.file.name or "").rpartition(".")[2]
    copy.file.save(f"{uuid.uuid4().hex}.{extension}", ContentFile(data), save=False)
    copy.save()
    return copy


def attachments_pending(*, conversation: Conversation) -> list[Attachment]:
    """Images uploaded to the conversation and not sent yet, oldest first."""
    return list(conversation.attachments.filter(message__isnull=True))


def attachments_for_turn(*, conversation: Conversation, ids: Sequence[int]) -> list[Attachment]:
    """The conversation's unsent attachments `ids`, in that order; refused if any is not one.

    Checked again when they are linked (`attachments_link`): two tabs sending the same
    image cannot both take it.
    """
    wanted = list(dict.fromkeys(ids))
    limit = settings.ATTACHMENTS_PER_TURN
    if len(wanted) > limit:
        raise ValidationError(f"A message can carry at most {limit} images; nothing was sent.")
    found = {
        attachment.pk: attachment
        for attachment in conversation.attachments.filter(pk__in=wanted, message__isnull=True)
    }
    if len(found) != len(wanted):
        raise ValidationError(
            "An image was already sent, removed, or belongs to another conversation; nothing was sent. "
            "Reload the page to see the images still waiting."
        )
    return [found[pk] for pk in wanted]


def attachments_link(*, message: Message, attachments: Sequence[Attachment]) -> None:
    """Give the attachments to `message` (inside the caller's transaction)."""
    if not attachments:
        return
    taken = Attachment.objects.filter(
        pk__in=[attachment.pk for attachment in attachments],
        conversation_id=message.conversation_id,
        message__isnull=True,
    ).update(message=message)
    if taken != len(attachments):
        raise ValidationError("An image was sent from another tab at the same moment; nothing was sent.")
    for attachment in attachments:
        attachment.message = message


def user_content(
    *, text: str, attachments: Sequence[Attachment], image_bytes: bool = True
) -> str | list[dict[str, Any]]:
    """A user message's `content`: the text alone, or OpenAI parts with each image as a data URL.

    `image_bytes=False` leaves each data URL empty without reading the file: enough for an
    estimate, which counts an image as a fixed size (`providers.images.IMAGE_PROMPT_CHARS`).
    """
    if not attachments:
        return text
    parts = [text_part(text)] if text else []
    for attachment in attachments:
        data = attachment_bytes(attachment) if image_bytes else b""
        if data is None:
            parts.append(text_part("(An image that is no longer stored.)"))
        else:
            parts.append(image_part(content_type=attachment.content_type, data=data))
    return parts


def attachment_bytes(attachment: Attachment) -> bytes | None:
    """The stored file's bytes; None (logged) when the file is gone."""
    try:
        with attachment.file.open("rb") as file:
            data: bytes = file.read()
    except OSError:
        logger.warning("attachment %s has no stored file", attachment.pk)
        return None
    return data


def upload_name(name: str | None) -> str:
    """A file name fit to show in a message (it is the user's text: templates escape it)."""
    name = (name or "").strip() or "The file"
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"
