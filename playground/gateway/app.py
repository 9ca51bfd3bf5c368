"""The gateway's endpoints: a plain ASGI app that `playground.asgi` serves beside Django's.

Why not Django views: every request through Django runs the whole middleware stack
(sessions, CSRF, authentication, django-htmx, the page security headers), built for pages;
an API call authenticated by its key needs none of it, and the gateway's added time to first
token is a figure users compare (issue 24). This app does only what an API call needs, and
stays on the same spine as every other path: `gateway_admit_many` (the key, its limits) and the
one `MeteredCall` (the budget, the meter, the one record writer, the one cost function).

Its ORM work runs through `lib.db.db_run`: in asgiref's one shared worker thread on SQLite,
in a pool of threads on PostgreSQL, each thread's connection kept between requests
(`lib.db.connections_heal` closes it only when it broke).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import aclosing, suppress
from decimal import Decimal
from functools import partial
from typing import Any
from urllib.parse import parse_qs

from django.conf import settings

from playground.gateway import admission_queue
from playground.gateway.admission import AdmissionRequest, Admitted, api_key_authenticate
from playground.gateway.attempts import attempt_adapter, attempt_call
from playground.gateway.attribution import attribution_read
from playground.gateway.bodies import BATCHES_HINT, client_request_read
from playground.gateway.errors import ErrorShape, GatewayError
from playground.gateway.idempotency import Replay, body_digest, idempotency_release, idempotency_store
from playground.gateway.models_list import models_for_key
from playground.gateway.ratelimits import rate_count_tokens, rate_tokens_counted
from playground.gateway.routed import BUDGET, Next, RoutedRequest, failure_kind, routed_success
from playground.gateway.routes import Action, Endpoint, endpoint_for, shape_for
from playground.gateway.scores import score_from_gateway
from playground.gateway.upstream_errors import error_for_failed_call
from playground.lib.db import connections_heal, db_run
from playground.providers.adapters import PassthroughAdapter
from playground.providers.events import UpstreamError, WireBytes, WireHead
from playground.routing.cooldown import target_failed
from playground.usage.calls.call import MeteredCall
from playground.usage.metering import Outcome

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class ClientGone(Exception):
    """The client hung up before its request was read whole: nothing to answer, nothing sent."""


async def gateway_app(scope: Scope, receive: Receive, send: Send) -> None:
    started = time.perf_counter()
    path: str = scope["path"]
    shape = shape_for(path)
    try:
        endpoint = endpoint_for(path)
        if endpoint is None:
            raise GatewayError(404, "not_found", f"No gateway endpoint at {path}.")
        if scope["method"] != endpoint.method:
            raise GatewayError(
                405, "method_not_allowed", f"{path} takes {endpoint.method}, not {scope['method']}."
            )
        headers = _headers(scope)
        if endpoint.action == Action.MODELS:
            await _send_json(send, 200, await _models(headers))
            return
        if endpoint.action == Action.SCORES:
            raw = await _read_body(receive)
            answer = await db_run(partial(score_from_gateway, _secret(headers), raw))
            await _send_json(send, answer.status, answer.body, answer.headers)
            return
        await _chat(scope, receive, send, endpoint, headers, started)
    except GatewayError as error:
        await _send_error(send, error, shape)
    except ClientGone:
        pass


async def _models(headers: dict[str, str]) -> dict[str, Any]:
    def listing() -> dict[str, Any]:
        connections_heal()
        key = api_key_authenticate(_secret(headers))
        data = [
            {"id": model, "object": "model", "created": 0, "owned_by": "playground"}
            for model in models_for_key(key)
        ]
        return {"object": "list", "data": data}

    result: dict[str, Any] = await db_run(listing)
    return result


async def _chat(
    scope: Scope, receive: Receive, send: Send, endpoint: Endpoint, headers: dict[str, str], started: float
) -> None:
    if (
        parse_qs(scope.get("query_string", b"").decode("latin-1")).get("queueRequest", [""])[0].lower()
        == "true"
    ):
        raise GatewayError(400, "queue_not_supported", BATCHES_HINT)
    raw = await _read_body(receive)
    attribution = attribution_read(headers)
    client = client_request_read(
        raw, route=endpoint.route, path_model=endpoint.path_model, affinity_key=attribution.affinity_key
    )
    idempotency_key = headers.get("idempotency-key")

    admitted = await admission_queue.admit(
        AdmissionRequest(
            secret=_secret(headers),
            route=endpoint.route,
            client=client,
            headers=attribution,
            idempotency_key=idempotency_key,
            digest=body_digest(raw) if idempotency_key is not None else "",
        )
    )
    if isinstance(admitted, Replay):
        await _send(send, admitted.status, {**admitted.headers, "idempotent-replayed": "true"}, admitted.body)
        return
    relay = _Relay(send, admitted, endpoint.shape, started, stream=client.stream)
    finished = await _until_disconnected(relay.run(), receive)
    if admitted.call.outcome is None:  # the client left before the call began: its budget was held
        await admitted.call.abandon()
    if not finished and admitted.claim is not None:
        await db_run(partial(idempotency_release, admitted.claim))


class _Relay:
    """One admitted request: its metered call's bytes to the client, then what follows the record."""

    def __init__(
        self, send: Send, admitted: Admitted, shape: ErrorShape, started: float, *, stream: bool
    ) -> None:
        self.send = send
        self.admitted = admitted
        self.shape = shape
        self.started = started
        self.stream = stream
        self.head: WireHead | None = None
        self.error: UpstreamError | None = None
        self.body = bytearray()  # a whole answer, sent once its record exists
        self.sent_start = False
        self.answered = False  # a whole answer sent before its record (`_answer_early`)
        self.status = 0
        self.headers_sent: dict[str, str] = {}

    async def run(self) -> None:
        while True:
            step = await self._relay_call()
            if step is None:
                break
            await self._next_attempt(step)
        if self.answered:
            await self._after()
        elif self.sent_start:  # a stream: its bytes went out as they came
            await self._after()
            tail = self._stream_error() if self.error is not None else b""
            await self.send({"type": "http.response.body", "body": tail, "more_body": False})
        else:
            await self._answer_whole()
            await self._after()

    async def _relay_call(self) -> Next | None:
        """Relay the current attempt's metered call; for a routed request whose attempt failed
        before any byte reached the client, where it goes next (None: it ends here)."""
        call, routed = self.admitted.call, self.admitted.routed
        if not self.stream and self.admitted.claim is None:
            # A whole answer goes out as soon as it is complete, priced by the card and cost
            # function its record will use; the record follows (with the calls ending meanwhile,
            # `usage.calls.settlement`). An idempotent one is kept before it is sent, so it waits.
            call.on_answered = self._answer_early
        step = None
        async with aclosing(call.events()) as events:
            async for event in events:
                match event:
                    case WireHead():
                        self.head = event
                        if routed is not None and event.status < 400:
                            # Its record says the status and how long the upstream took to answer.
                            call.route = routed.end(event.status, "")
                            routed_success(routed, self.admitted.key.team_id)
                    case WireBytes(data=data) if self.stream:
                        await self._stream_bytes(data)
                    case WireBytes(data=data):
                        self.body += data
                    case UpstreamError():
                        self.error = event
                        if routed is not None:
                            # Decided before the call's record is written (as its generator
                            # ends), so the record says whether and why the request moved on.
                            step = self._after_failure(routed, event) if not self.sent_start else None
        return step

    def _after_failure(self, routed: RoutedRequest, error: UpstreamError) -> Next | None:
        call = self.admitted.call
        refused = bool(call.refusal)
        step = routed.after_failure(error, refused=refused)
        status = BUDGET if refused else failure_kind(error)
        moved_on = "" if step is None else (BUDGET if refused else str(status))
        call.route = routed.end(status, moved_on)
        return step

    async def _next_attempt(self, step: Next) -> None:
        """Count the failure (cooldowns), wait the step's backoff, and make the next attempt's call."""
        routed, admitted = self.admitted.routed, self.admitted
        assert routed is not None and admitted.request is not None and admitted.chat is not None
        if routed.attempts[-1].status != BUDGET:
            await target_failed(routed.target, routed.plan.cooldown)
        if step.delay:
            await asyncio.sleep(step.delay)
        routed.move(step)
        request, chat = admitted.request, admitted.chat

        def build() -> tuple[PassthroughAdapter, MeteredCall]:
            adapter, sent = attempt_adapter(
                admitted.key,
                routed.target,
                route=request.route,
                chat=chat,
                body=request.client.body,
                client_wants_usage=request.client.client_wants_usage,
            )
            call = attempt_call(
                admitted.key,
                adapter,
                sent,
                target=routed.target,
                attribution=request.headers.attribution,
                store_asked=request.headers.store_asked,
                held_at_admission=False,
            )
            return adapter, call

        adapter, call = await db_run(build)
        call.route = routed.begin(str(call.context.request_id))
        self.head, self.error, self.body = None, None, bytearray()
        admitted.adapter, admitted.call = adapter, call

    async def _answer_early(self, _: Outcome) -> None:
        """A whole answer the upstream gave, with its cost, before its record is written (an
        error, with no body to relay, is answered after the record, as before)."""
        if self.head is None or not self.body:
            return
        cost = self.admitted.call.cost()
        self._answer(
            self.head.status, {"content-type": self.head.content_type, "x-playground-cost-usd": _usd(cost)}
        )
        await self._send_start()
        await self.send({"type": "http.response.body", "body": bytes(self.body), "more_body": False})
        self.answered = True

    async def _stream_bytes(self, data: bytes) -> None:
        if not self.sent_start:
            assert self.head is not None
            self._answer(self.head.status, {"content-type": self.head.content_type})
            await self._send_start()
        await self.send({"type": "http.response.body", "body": data, "more_body": True})

    def _stream_error(self) -> bytes:
        """The failure of a stream already started, as a last event in the API's shape (the
        `openai` SDK raises an `{"error"}` event as an APIError): a stream cut short must not
        look finished."""
        assert self.error is not None
        error = GatewayError(502, self.error.code or "upstream_error", f"Upstream: {self.error.message}")
        return b"data: " + error.body(self.shape) + b"\n\n"

    async def _answer_whole(self) -> None:
        """A non-streamed answer (with its cost), or an error no byte of which was relayed yet.

        Kept for an idempotent repeat before it is sent: a client that repeats the moment it
        has the answer gets the answer again, never a 409."""
        record = self.admitted.call.record
        if self.head is not None and self.body:
            headers = {"content-type": self.head.content_type}
            if record is not None:
                headers["x-playground-cost-usd"] = _usd(record.total_cost)
            self._answer(self.head.status, headers)
        else:
            error = error_for_failed_call(self.admitted.call, self.error)
            self.body = bytearray(error.body(self.shape))
            self._answer(error.status, {"content-type": "application/json", **error.headers})
        await self._after()
        await self._send_start()
        await self.send({"type": "http.response.body", "body": bytes(self.body), "more_body": False})

    def _answer(self, status: int, headers: dict[str, str]) -> None:
        """The answer's status and headers, with the gateway's own; the overhead is measured now."""
        self.status = status
        self.headers_sent = {
            **headers,
            **self.admitted.rate.headers,
            "x-playground-request-id": str(self.admitted.call.context.request_id),
            "x-playground-overhead-ms": self._overhead_ms(),
            "x-playground-attempts": str(self.admitted.adapter.attempts),
            **(self.admitted.routed.headers() if self.admitted.routed is not None else {}),
        }

    def _overhead_ms(self) -> str:
        upstream = self.admitted.adapter.upstream_seconds
        return f"{max(0.0, (time.perf_counter() - self.started - upstream) * 1000):.2f}"

    async def _send_start(self) -> None:
        # Measured again as it goes out: storing an idempotent answer and counting the key's
        # tokens (`_after`) may have run since `_answer`.
        self.headers_sent["x-playground-overhead-ms"] = self._overhead_ms()
        self.sent_start = True
        await self.send(
            {"type": "http.response.start", "status": self.status, "headers": _encoded(self.headers_sent)}
        )

    async def _after(self) -> None:
        """The key's tokens this minute, and the answer kept for an idempotent repeat (one blocking step)."""
        key, claim, record = self.admitted.key, self.admitted.claim, self.admitted.call.record
        tokens = record.prompt_tokens + record.completion_tokens if record is not None else 0
        if claim is None:
            if key.tokens_per_minute and tokens:
                await rate_tokens_counted(key, tokens)
            return

        def after() -> None:
            rate_count_tokens([(key, tokens)])
            sent = self.headers_sent.items()
            kept = {name: value for name, value in sent if not name.startswith("x-ratelimit-")}
            idempotency_store(claim, status=self.status, headers=kept, body=bytes(self.body))

        await db_run(after)


async def _until_disconnected(work: Awaitable[None], receive: Receive) -> bool:
    """Run `work` until it ends or the client hangs up (then it is cancelled: the metered call
    still writes its record, `client_disconnected`). Returns whether it ended by itself."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            task.cancel()
        watcher.cancel()
    with suppress(asyncio.CancelledError):
        await task
    return not task.cancelled()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _read_body(receive: Receive) -> bytes:
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        body += message.get("body", b"")
        if len(body) > settings.GATEWAY_MAX_BODY_BYTES:
            raise GatewayError(
                413,
                "request_too_large",
                f"The body is over {settings.GATEWAY_MAX_BODY_BYTES // 1_000_000} MB.",
            )
        if not message.get("more_body"):
            return bytes(body)


def _headers(scope: Scope) -> dict[str, str]:
    return {
        name.decode("latin-1").lower(): value.decode("utf-8", "replace") for name, value in scope["headers"]
    }


def _secret(headers: dict[str, str]) -> str | None:
    authorization = headers.get("authorization", "")
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return headers.get("x-api-key") or None


def _usd(amount: Decimal) -> str:
    return f"{Decimal(amount):.10f}"


def _encoded(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(name.encode("latin-1"), value.encode("latin-1", "replace")) for name, value in headers.items()]


async def _send(send: Send, status: int, headers: dict[str, str], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": _encoded(headers)})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _send_json(send: Send, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
    await _send(
        send, status, {"content-type": "application/json", **(headers or {})}, json.dumps(value).encode()
    )


async def _send_error(send: Send, error: GatewayError, shape: ErrorShape) -> None:
    await _send(send, error.status, {"content-type": "application/json", **error.headers}, error.body(shape))
