"""Who sent what, where: the part of a usage record known before the request is sent."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

from playground.lib.redaction import Redaction
from playground.providers.structured_answers import AnswerFormat
from playground.usage.models import RequestPath
from playground.usage.pricing import KnownCard


@dataclass(frozen=True)
class Attribution:
    """What a gateway request said about itself (its key and headers); empty for the app's own paths."""

    api_key_id: int | None = None
    end_user: str = ""
    session: str = ""
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] | None = None
    trace_id: str = ""

    def record_fields(self) -> dict[str, Any]:
        return {
            "api_key_id": self.api_key_id,
            "end_user": self.end_user,
            "session": self.session,
            "tags": f",{','.join(self.tags)}," if self.tags else "",
            "metadata": self.metadata,
            "trace_id": self.trace_id,
        }


@dataclass(frozen=True)
class RouteRecord:
    """What a routing policy decided for the request this record is an attempt of (issue 35);
    empty for requests no policy routed. `detail` is the whole decision, as stored: the policy
    version, the rule, this record's attempt number, every attempt (target, status, time, why it
    moved on), the final target, a downgrade and its reason, an added affinity key."""

    rule: str = ""
    fell_back: bool = False
    downgraded: bool = False
    detail: dict[str, Any] | None = None

    def record_fields(self) -> dict[str, Any]:
        return {
            "route_rule": self.rule[:100],
            "route_fell_back": self.fell_back,
            "route_downgraded": self.downgraded,
            "routing": self.detail,
        }


@dataclass(frozen=True)
class RequestContext:
    """Who sent what, where: the part of a record known before the request is sent."""

    team_id: int
    user_id: int | None
    connection_id: int | None
    model_id: str
    conversation_id: int | None = None
    preset_version_id: int | None = None  # the preset version whose setup sent it
    affinity_key: str = ""
    streamed: bool = True
    path: str = RequestPath.CHAT
    source: str = ""  # see UsageRecord.source
    # The day whose price card prices the request; None: today. A batch item is priced by the
    # card of the day its batch was submitted, however long the queue takes.
    priced_on: dt.date | None = None
    # That card, when the caller already looked it up with `request_price_card` (a batch step
    # records hundreds of items priced by one card); None: the writer looks it up.
    price_card: KnownCard | None = None
    # The body as sent upstream, secrets and images redacted (the metered call fills it in).
    request_body: dict[str, Any] | None = None
    # The JSON response format the request asked for, whose answer the record checks (the
    # metered call fills it in, from the request); None: text.
    answer_format: AnswerFormat | None = None
    # The prompt variables' values the request was sent with (the metered call fills it in).
    variables: dict[str, str] | None = None
    attribution: Attribution = Attribution()
    # The record's `request_id`, when the caller must name it before the record exists (the
    # gateway sends it in the answer's headers); None: a new one.
    request_id: uuid.UUID | None = None
    route: RouteRecord = RouteRecord()  # the routing policy's decision (gateway requests it routed)
    # What the record keeps of its text (`accounts.StoreMode`, `usage.storage`): set for a gateway
    # request from its key and headers; "": the team's mode, read when the record is written.
    store: str = ""
    # Upstream redaction (`calls.upstream`): whether the request goes upstream with placeholders
    # for its sensitive values (a gateway request: its team's, known with its key); None: the
    # team's setting, read before the request is held and sent.
    upstream_redaction: bool | None = None
    # The redaction that made those placeholders (its salt and counts): the record's own, so what
    # it keeps reads the same placeholders the model saw. None: the request went as written.
    redaction: Redaction | None = None
