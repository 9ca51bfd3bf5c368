"""What a request says about itself in its headers, read, checked and capped for its usage record.

`x-session-affinity` (forwarded untouched, recorded as the affinity key),
`x-playground-session`, `x-playground-user` (the caller's end user), `x-playground-tags`
(comma-separated), `x-playground-metadata` (a JSON object) and `traceparent` (its trace id).
A request over a cap is refused with a 400 that names the header: a value cut or dropped
without a word would make the records disagree with what the caller sent. Beside them,
`x-playground-store` asks that the record keep less of the request's text than the key's
storage mode says (`usage.storage`); an unknown value is refused the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from playground.accounts.models import StoreMode
from playground.gateway.errors import GatewayError
from playground.lib.storable import storable_json
from playground.usage.calls.context import Attribution

VALUE_MAX_BYTES = 1024
METADATA_MAX_BYTES = 4096  # a JSON object says more than a name
TOTAL_MAX_BYTES = 6144  # less than the caps summed (7.3 KiB), so it is a cap of its own
TAGS_MAX = 20
AFFINITY_MAX = 120  # the record's column; Workers AI keys are short ids
ATTRIBUTION_HEADERS = (
    "x-session-affinity",
    "x-playground-session",
    "x-playground-user",
    "x-playground-tags",
    "x-playground-metadata",
    "traceparent",
)
# W3C Trace Context: version-traceid-parentid-flags, lower-case hex; an all-zero id is invalid.
TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")


STORE_HEADER = "x-playground-store"


@dataclass(frozen=True)
class RequestAttribution:
    affinity_key: str
    attribution: Attribution  # without the key (the admission adds it)
    store_asked: str = ""  # x-playground-store: "" or a StoreMode, applied only if it is less


def attribution_read(headers: Mapping[str, str]) -> RequestAttribution:
    """The attribution headers of a request, or a `GatewayError` (400) naming what is wrong."""
    present = {name: headers[name] for name in ATTRIBUTION_HEADERS if name in headers}
    total = sum(len(value.encode()) for value in present.values())
    if total > TOTAL_MAX_BYTES:
        raise _invalid(
            f"The x-playground-*, x-session-affinity and traceparent headers hold {total} bytes together; "
            f"at most {TOTAL_MAX_BYTES} are accepted."
        )
    for name, value in present.items():
        cap = METADATA_MAX_BYTES if name == "x-playground-metadata" else VALUE_MAX_BYTES
        if len(value.encode()) > cap:
            raise _invalid(
                f"The {name} header is {len(value.encode())} bytes long; at most {cap} are accepted."
            )
    affinity = present.get("x-session-affinity", "")
    if len(affinity) > AFFINITY_MAX:
        raise _invalid(
            f"The x-session-affinity header is {len(affinity)} characters long; at most {AFFINITY_MAX}."
        )
    return RequestAttribution(
        affinity_key=affinity,
        attribution=Attribution(
            end_user=present.get("x-playground-user", "").strip(),
            session=present.get("x-playground-session", "").strip(),
            tags=_tags(present.get("x-playground-tags", "")),
            metadata=_metadata(present.get("x-playground-metadata")),
            trace_id=_trace_id(present.get("traceparent")),
        ),
        store_asked=_store_asked(headers.get(STORE_HEADER, "")),
    )


def _store_asked(value: str) -> str:
    asked = value.strip().lower()
    if asked and asked not in StoreMode.values:
        raise _invalid(
            f"The {STORE_HEADER} header must be one of {', '.join(StoreMode.values)}: it asks the "
            "record to keep less of the request's text than the key's storage mode, never more."
        )
    return asked


def _tags(value: str) -> tuple[str, ...]:
    tags = tuple(dict.fromkeys(tag.strip() for tag in value.split(",") if tag.strip()))
    if len(tags) > TAGS_MAX:
        raise _invalid(f"The x-playground-tags header has {len(tags)} tags; at most {TAGS_MAX} are accepted.")
    return tags


def _metadata(value: str | None) -> dict[str, object] | None:
    if value is None or not value.strip():
        return None
    try:
        metadata = json.loads(value)
    except ValueError:
        raise _invalid("The x-playground-metadata header is not JSON: send a JSON object.") from None
    if not isinstance(metadata, dict):
        raise _invalid("The x-playground-metadata header must be a JSON object.")
    stored: dict[str, object] = storable_json(metadata)
    return stored


def _trace_id(value: str | None) -> str:
    if value is None:
        return ""
    match = TRACEPARENT.match(value.strip())
    if match is None or match.group(1) == "0" * 32:
        raise _invalid("The traceparent header is not a W3C trace context (00-<32 hex>-<16 hex>-<2 hex>).")
    return match.group(1)


def _invalid(message: str) -> GatewayError:
    return GatewayError(400, "invalid_header", message)
