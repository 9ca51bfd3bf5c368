"""What a model id may look like, and how it goes into a request path.

Workers AI (and the embedded engine) put the model id in the URL path
(`/ai/run/@cf/moonshotai/kimi-k2.5`), and engine and OpenAI-compatible connections accept
a free-text id. Ids are letters, digits and `@ . _ : + - /`, with `/` only between
non-empty segments that are not `.` or `..`: that covers every provider's ids
(`@cf/meta/llama-3.1-8b-instruct`, `ft:gpt-4o-mini:org::id`, `meta-llama/Llama-3.1-8B:free`)
and leaves no way to climb the path, start a query or smuggle an encoded character.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from django.core.exceptions import ValidationError

MODEL_ID_MAX_CHARS = 200
_SEGMENT = r"(?!\.+(?:/|$))[A-Za-z0-9@._:+-]+"  # not all dots: no `.` or `..` segment
MODEL_ID_PATTERN = re.compile(rf"{_SEGMENT}(?:/{_SEGMENT})*")
MODEL_ID_HELP = "A model id is letters, digits and @ . _ : + - /, like @cf/meta/llama-3.1-8b-instruct."


def model_id_validate(model_id: str) -> None:
    """Raise `ValidationError` unless `model_id` is a well-formed model id."""
    if len(model_id) > MODEL_ID_MAX_CHARS:
        raise ValidationError(f"A model id can be at most {MODEL_ID_MAX_CHARS} characters.")
    if not MODEL_ID_PATTERN.fullmatch(model_id):
        raise ValidationError(f"That is not a valid model id. {MODEL_ID_HELP}")


def model_id_path(model_id: str) -> str:
    """The id as a URL path suffix: validated, then percent-encoded (its `/` kept)."""
    model_id_validate(model_id)
    return quote(model_id, safe="/@:+")
