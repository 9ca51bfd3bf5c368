"""Storage modes (issue 37): which applies to a request, and what its usage record keeps of its
text under it.

A team's mode (`Team.store_mode`) covers its chat, compare and batch requests and its gateway
keys, unless a key names its own (`ApiKey.store_mode`); a gateway request may ask for less with
`x-playground-store`, never for more (`store_mode_applied`). The record writer
(`usage.records`) hands every text a record holds to `record_text_kept` before anything is
written: the request body, the prompt variables' values, the error text and the schema errors'
messages. The prompt's digests (`usage.prefix_digest`) are taken from the body before this, so
the cache-break detector works on every mode. What goes upstream is changed only when the team
turns on upstream redaction (`usage.calls.upstream`): the record then redacts with the same
`Redaction`, so it keeps the placeholders the model saw.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from playground.accounts.models import StoreMode, Team
from playground.lib.redaction import Redaction, new_salt
from playground.usage.models import TEAM_STORE_MODE, ApiKey

logger = logging.getLogger(__name__)

# From most kept to least: a request may move right along it, never left.
LESS = (StoreMode.FULL, StoreMode.REDACTED, StoreMode.METADATA)
REDACTOR_ERROR = "redactor_error"  # the count a record keeps when its redactor failed
NOT_KEPT = "(not kept: the redactor failed on it)"


def store_mode_applied(configured: str, asked: str = "") -> str:
    """`configured`, or less if the request `asked` for less (an empty ask: as configured)."""
    if not asked:
        return configured
    return LESS[max(LESS.index(StoreMode(configured)), LESS.index(StoreMode(asked)))]


def key_store_mode(key: ApiKey) -> str:
    """The mode a key's requests are recorded in (its team's when it names none); `key.team`
    is loaded with the key (`usage.api_keys`), so this reads nothing."""
    return key.store_mode if key.store_mode != TEAM_STORE_MODE else key.team.store_mode


def team_store_mode(team_id: int) -> str:
    """The team's mode, read when a record of its own requests (chat, compare, batch) is written,
    so that a change applies to the next record in every process."""
    mode = Team.objects.filter(pk=team_id).values_list("store_mode", flat=True).first()
    return mode or StoreMode.FULL


@dataclass(frozen=True)
class KeptText:
    """What a record keeps of its text, and the mode it was kept in."""

    store_mode: str
    request_body: dict[str, Any] | None
    variables: dict[str, str] | None
    error_text: str
    schema_errors: list[dict[str, str]] | None
    redactions: dict[str, int] | None  # see UsageRecord.redactions


def record_text_kept(
    *,
    mode: str,
    request_body: dict[str, Any] | None,
    variables: dict[str, str] | None,
    error_text: str,
    schema_errors: list[dict[str, str]] | None,
    redaction: Redaction | None = None,
    salt: bytes | None = None,
) -> KeptText:
    """The record's text in `mode`: as sent (`full`); with sensitive values replaced, the same
    value by the same placeholder throughout the record (`redacted`); without the body, the
    variables' values or the answer's words in schema errors, the error text redacted
    (`metadata`). A redactor that fails costs the record its text, never the record: it is kept
    as `metadata` with that failure counted.

    `redaction`: the one the request was sent upstream with (`usage.calls.upstream`), whose salt
    the record's placeholders share; the body is then already redacted, and in `full` its counts
    are the record's. `salt`: else the one to redact with (`usage.redaction_salt`: the
    conversation's, so its records read the same placeholders; None: a new one)."""
    if mode == StoreMode.FULL:
        counts = dict(redaction.counts) if redaction is not None else None
        return KeptText(mode, request_body, variables, error_text, schema_errors, counts)
    redacted = mode == StoreMode.REDACTED
    try:
        if redaction is None:
            redaction = Redaction(phone_region=settings.REDACTION_PHONE_REGION, salt=salt or new_salt())
        return KeptText(
            store_mode=mode,
            request_body=redaction.value(request_body) if redacted else None,
            variables=redaction.value(variables) if redacted else None,
            error_text=redaction.text(error_text),
            schema_errors=_schema_errors(schema_errors, redaction, messages=redacted),
            redactions=dict(redaction.counts),
        )
    except Exception as exc:  # whatever it was, the record is written
        # Its message may quote what it was reading: only the exception's type is logged.
        logger.error("the redactor failed (%s): the record keeps its metadata only", type(exc).__name__)
        return KeptText(
            store_mode=StoreMode.METADATA,
            request_body=None,
            variables=None,
            error_text=NOT_KEPT if error_text else "",
            schema_errors=_schema_errors(schema_errors, None, messages=False),
            redactions={REDACTOR_ERROR: 1},
        )


def _schema_errors(
    errors: list[dict[str, str]] | None, redaction: Redaction | None, *, messages: bool
) -> list[dict[str, str]] | None:
    """Schema errors redacted, their messages (which quote the answer's values) kept only when
    `messages`; without a redaction, neither the messages nor the paths (which may hold the
    answer's own keys) are kept."""
    if not errors:
        return errors
    return [
        {
            "path": redaction.text(error["path"]) if redaction else "",
            "message": redaction.text(error["message"]) if redaction and messages else "",
        }
        for error in errors
    ]
