"""Workers AI's pull-based queue, as a wire format: submit with `?queueRequest=true`, poll by id.

docs/reference/workers-ai-api.md §7: `POST {base}/accounts/{account}/ai/run/{model}?queueRequest=true` with
`{"requests": [...]}` answers `{"status": "queued", "request_id"}` (in the v4 envelope);
posting `{"request_id"}` to the same URL answers the same status while the work is
`queued` or `running`, and `{"responses": [{id, result, success, external_reference}],
"usage"}` once it is done. Responses come in any order; `id` is the index in the submitted
array. The embedded engine serves the same routes.

Both calls go through the one HTTP seam and the one retry layer (429 and 5xx are retried
with backoff there; a failure that outlasts it is raised as `UpstreamHTTPError` for the
caller to reschedule). Nothing here sleeps between polls: the caller schedules them.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from playground.lib.json_types import JSONObject, JSONValue
from playground.providers.adapters.frames import decode_body, error_details, unwrap_envelope
from playground.providers.events import request_at_fault
from playground.providers.http import TimeoutPolicy, UpstreamHTTPError, upstream_stream
from playground.providers.model_ids import model_id_path
from playground.providers.retry import retrying
from playground.providers.secrets import redact

# How a refusal of the whole submission names the one item at fault: "requests[3]: `temperature`
# must be a number from 0 to 2; got 5." (the embedded engine), "requests[3].external_reference ...".
_NAMED_ITEM = re.compile(r"\brequests\[(\d+)\][:.]?\s*")


@dataclass(frozen=True)
class QueuePending:
    status: str  # "queued" or "running"


@dataclass(frozen=True)
class QueueResponse:
    id: int | None
    external_reference: str | None
    success: bool
    result: JSONValue  # the model's output as the queue returned it


@dataclass(frozen=True)
class QueueResults:
    responses: list[QueueResponse]


@dataclass(frozen=True)
class RefusedItem:
    """A submission refused because of one of its requests: which one, and why (its own words)."""

    position: int  # its index in the submitted `requests`
    reason: str


def refused_item(exc: UpstreamHTTPError, *, count: int) -> RefusedItem | None:
    """The item a refused submission of `count` requests names as at fault, if it names one.

    Only for refusals that blame the request (invalid input), never for rate or server errors:
    then the other items can be sent again without it.
    """
    if exc.retryable or not request_at_fault(http_status=exc.status, code=exc.code):
        return None
    match = _NAMED_ITEM.search(exc.message)
    if match is None or int(match.group(1)) >= count:
        return None
    reason = (exc.message[: match.start()] + exc.message[match.end() :]).strip()
    return RefusedItem(position=int(match.group(1)), reason=reason or exc.message)


class QueueClient:
    """Submit and poll one model's queue on a Workers AI-shaped endpoint."""

    def __init__(self, *, base_url: str, account_id: str, token: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.account_id = account_id
        self.token = token

    def endpoint(self, model: str) -> str:
        account = quote(self.account_id, safe="")
        return f"{self.base_url}/accounts/{account}/ai/run/{model_id_path(model)}?queueRequest=true"

    async def submit(self, *, model: str, requests: list[JSONObject]) -> str:
        """Queue `requests` (each a model input, optionally with `external_reference`); the request_id."""
        body = await self._post(model, {"requests": requests})
        request_id = body.get("request_id")
        if not isinstance(request_id, str) or not request_id:
            raise UpstreamHTTPError(
                "The upstream accepted the batch but sent no request_id.", code="no_request_id"
            )
        return request_id

    async def poll(self, *, model: str, request_id: str) -> QueuePending | QueueResults:
        body = await self._post(model, {"request_id": request_id})
        responses = body.get("responses")
        if isinstance(responses, list):
            return QueueResults([_response(item) for item in responses if isinstance(item, Mapping)])
        status = body.get("status")
        if isinstance(status, str) and status in ("queued", "running"):
            return QueuePending(status)
        raise UpstreamHTTPError(
            f"The upstream answered a poll with neither a status nor results (status {status!r}).",
            code="malformed_reply",
        )

    async def _post(self, model: str, payload: JSONObject) -> Mapping[str, Any]:
        policy = TimeoutPolicy.from_settings()
        deadline = policy.deadline()
        try:
            async with aclosing(
                retrying(lambda: self._attempt(model, payload, policy, deadline), deadline=deadline)
            ) as replies:
                async for reply in replies:
                    return reply
        except UpstreamHTTPError as exc:
            raise self._explained(exc) from exc
        raise UpstreamHTTPError("The upstream sent no reply.")

    async def _attempt(
        self, model: str, payload: JSONObject, policy: TimeoutPolicy, deadline: float
    ) -> AsyncGenerator[Mapping[str, Any]]:
        headers = {"accept": "application/json"}
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        async with upstream_stream(
            "POST",
            self.endpoint(model),
            headers=headers,
            json=payload,
            timeout_policy=policy,
            deadline=deadline,
        ) as response:
            yield unwrap_envelope(decode_body(await response.read()))

    def _explained(self, exc: UpstreamHTTPError) -> UpstreamHTTPError:
        """The error with the upstream's own message (redacted), keeping status and retry facts."""
        code, message = error_details(_json_or_none(exc.body)) if exc.body else ("", "")
        if not message:
            return exc
        return UpstreamHTTPError(
            redact(message, [self.token] if self.token else []),
            status=exc.status,
            code=code or exc.code,
            retry_after=exc.retry_after,
            is_timeout=exc.is_timeout,
            retryable=exc.retryable,
            request_id=exc.request_id,
        )


def _response(item: Mapping[str, Any]) -> QueueResponse:
    position = item.get("id")
    reference = item.get("external_reference")
    return QueueResponse(
        id=position if isinstance(position, int) and not isinstance(position, bool) else None,
        external_reference=reference if isinstance(reference, str) else None,
        success=item.get("success") is not False,
        result=item.get("result"),
    )


def _json_or_none(raw: str) -> JSONValue:
    try:
        value: JSONValue = json.loads(raw)
    except ValueError:
        return None
    return value
