"""The HTTP front end: Workers AI (`/ai/run`, v4 envelope) and OpenAI (`/ai/v1`) routes, and the
engine's own (`/engine/v1/tokenize`, `/healthz`).

Handlers only read and check the request, hand a job to the replica pool (or the batch
queue) and render its events. Errors on `/ai/run` use the v4 envelope; errors on
`/ai/v1` use OpenAI's `{"error": {...}}` shape, which OpenAI clients know how to raise,
also mid-stream. Routing errors (no such path or method) use the v4 envelope on every
path, as Cloudflare's own routing layer does.

The account id in the path scopes the prefix cache and the batch queue: a request never
reuses KV that another account's request left, and a batch is polled by its own account.
The model named by the path (`/ai/run/{model}`) or the body (`model` on `/ai/v1`) chooses
which of the served models, and so which replicas, answer.

The tokenize route counts a chat request's prompt tokens as its model would (`prompts`), with
the vocabularies the front end loads at start, on one thread of its own: counting takes no
replica and never holds up the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from playground.engine.batch_queue import BatchQueue, QueuedItem
from playground.engine.chat_input import ChatRequest, parse_chat
from playground.engine.config import EngineConfig
from playground.engine.errors import (
    AUTHENTICATION,
    INCOMPLETE_REQUEST,
    INTERNAL,
    NO_ROUTE,
    REQUEST_TOO_LARGE,
    EngineError,
    invalid_input,
    no_such_model,
    served_text,
)
from playground.engine.jobs import Job, collect
from playground.engine.messages import Turn
from playground.engine.metrics import engine_registry
from playground.engine.model_file import ServedModel
from playground.engine.pool import ModelReplicas, ReplicaPool
from playground.engine.prompts import PromptTokenizer, vocabulary_tokenizer
from playground.engine.protocol import Failed, Finished, GenerationSpec, TextDelta, ToolCall
from playground.engine.replica import ReplicaSettings
from playground.engine.shapes import (
    Reply,
    envelope,
    error_envelope,
    openai_error,
    sse,
    tool_call_deltas,
)

logger = logging.getLogger(__name__)

ACCOUNT = "/client/v4/accounts/{account_id}"
Handler = Callable[[Request], Awaitable[Response]]


def _is_openai_path(path: str) -> bool:
    return "/ai/v1/" in path


def _error_response(error: EngineError, *, openai: bool) -> JSONResponse:
    body = openai_error(error) if openai else error_envelope(error)
    return JSONResponse(body, status_code=error.status)


def _answering_errors(handler: Handler, *, openai: bool) -> Handler:
    """`handler`, with `EngineError` (and any surprise) turned into this route's error shape."""

    @functools.wraps(handler)
    async def wrapper(request: Request) -> Response:
        try:
            return await handler(request)
        except EngineError as exc:
            return _error_response(exc, openai=openai)
        except Exception:
            logger.exception("unexpected error on %s", request.url.path)
            return _error_response(
                EngineError(INTERNAL, 500, "Internal error; see the engine log."), openai=openai
            )

    return wrapper


class BearerAuth:
    """Requires `Authorization: Bearer <token>` on every request, compared in constant time."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._digest = hashlib.sha256(token.encode()).digest()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        error = EngineError(
            AUTHENTICATION, 401, "Authentication error: send 'Authorization: Bearer <token>'."
        )
        response = _error_response(error, openai=_is_openai_path(scope["path"]))
        response.headers["www-authenticate"] = "Bearer"
        await response(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        header = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
        scheme, _, credentials = header.partition(b" ")
        # Hashing both sides first makes the comparison constant-time in the length too.
        offered = hashlib.sha256(credentials.strip()).digest()
        return scheme.lower() == b"bearer" and hmac.compare_digest(offered, self._digest)


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    too_large = EngineError(
        REQUEST_TOO_LARGE, 413, f"The request body is larger than the {limit}-byte limit."
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise too_large
    if not raw.strip():
        raise EngineError(INCOMPLETE_REQUEST, 400, "The request has no body; send a JSON object.")
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise invalid_input(f"The request body is not valid JSON: {exc}.") from exc
    if not isinstance(body, dict):
        raise invalid_input("The request body must be a JSON object.")
    return body


class Engine:
    """The state the routes share: configuration, the replica pool and the batch queue.

    `open` runs before the server listens, so nothing is served until every replica has
    passed its self-test; it raises `EngineStartupError` when one cannot.
    """

    def __init__(self, config: EngineConfig, models: list[ServedModel]) -> None:
        self.config = config
        self.served = models
        self.model_ids = [model.model_id for model in models]  # the default one first
        self.started = int(time.time())
        self.pool: ReplicaPool
        self.queue: BatchQueue
        self.registry: CollectorRegistry  # what /metrics serves
        self.tokenizers: dict[str, PromptTokenizer] = {}
        # One thread: llama.cpp's tokenizer is not documented as safe to share between threads.
        self._counting = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenize")

    async def open(self) -> None:
        self.queue = BatchQueue(self.config.queue_path)
        self.pool = ReplicaPool(
            [
                ModelReplicas(model.model_id, self._replica_settings(model), model.replicas)
                for model in self.served
            ],
            queue=self.queue,
            batch_spec=self._batch_spec,
            balance=self.config.balance,
        )
        self.registry = engine_registry(self.pool, self.queue)
        try:
            await self.pool.start()
            # After the replicas, whose start-up says what is wrong with a model file or template.
            for model in self.served:
                self.tokenizers[model.model_id] = await asyncio.get_running_loop().run_in_executor(
                    self._counting, vocabulary_tokenizer, model.path, model.chat_format
                )
        except BaseException:
            await self.close()
            raise
        for model in self.served:
            logger.info("serving %s from %s with %d replicas", model.model_id, model.path, model.replicas)
        logger.info("requests without x-session-affinity: %s", self.config.balance)

    def _replica_settings(self, model: ServedModel) -> ReplicaSettings:
        return ReplicaSettings(
            model_path=model.path,
            chat_format=model.chat_format,
            context_size=model.context_size,
            threads=model.threads,
            prefix_cache_bytes=self.config.prefix_cache_bytes,
            log_level=self.config.log_level,
        )

    async def close(self) -> None:
        await self.pool.stop()
        self.queue.close()
        self._counting.shutdown(wait=False, cancel_futures=True)

    def _parse(self, body: Mapping[str, Any], account: str, model: str) -> ChatRequest:
        chat = parse_chat(body, model_id=model, default_max_tokens=self.config.default_max_tokens)
        return replace(chat, spec=replace(chat.spec, cache_scope=account))

    def _batch_spec(self, item: QueuedItem) -> GenerationSpec:
        return self._parse(item.body, item.account, item.model).spec

    def _served(self, model: Any) -> str:
        if model not in self.model_ids:
            raise no_such_model(model, self.model_ids)
        return str(model)

    # --- routes ---

    async def run(self, request: Request) -> Response:
        body = await read_json(request, self.config.max_body_bytes)
        model = self._served(request.path_params["model"])
        account = request.path_params["account_id"]
        if "request_id" in body:
            return await self._poll(body["request_id"], account)
        if request.query_params.get("queueRequest", "").lower() in ("true", "1"):
            return await self._enqueue(body, account, model)
        return await self._answer(self._parse(body, account, model), model, request, openai=False)

    async def chat_completions(self, request: Request) -> Response:
        body = await read_json(request, self.config.max_body_bytes)
        if not isinstance(body.get("model"), str):
            raise invalid_input(f"`model` is required; this engine serves {served_text(self.model_ids)}.")
        model = self._served(body["model"])
        chat = self._parse(body, request.path_params["account_id"], model)
        return await self._answer(chat, model, request, openai=True)

    async def models(self, request: Request) -> Response:
        windows = self.pool.context_windows()
        data = [
            {
                "id": model_id,
                "object": "model",
                "created": self.started,
                "owned_by": "playground",
                "context_window": windows.get(model_id),
            }
            for model_id in self.model_ids
        ]
        return JSONResponse({"object": "list", "data": data})

    async def tokenize(self, request: Request) -> Response:
        """The prompt tokens of a chat request (`messages` or `prompt`, with its `tools` and
        `response_format`), or of each of `requests`, as the model's template renders them: what
        `usage.prompt_tokens` would say if it were sent. Also the model's context window."""
        body = await read_json(request, self.config.max_body_bytes)
        if not isinstance(body.get("model"), str):
            raise invalid_input(f"`model` is required; this engine serves {served_text(self.model_ids)}.")
        model = self._served(body["model"])
        many = body.get("requests")
        if many is not None and (not isinstance(many, list) or not many):
            raise invalid_input("`requests` must be a non-empty list of chat requests.")
        bodies = many if many is not None else [body]
        turns = [
            self._turns(item, model, f"requests[{index}]: " if many else "")
            for index, item in enumerate(bodies)
        ]
        counts = await asyncio.get_running_loop().run_in_executor(self._counting, self._count, model, turns)
        answer: dict[str, Any] = {"model": model, "context_window": self.pool.context_windows().get(model)}
        if many is None:
            return JSONResponse({**answer, "prompt_tokens": counts[0]})
        return JSONResponse({**answer, "requests": [{"prompt_tokens": count} for count in counts]})

    def _turns(self, body: Any, model: str, where: str) -> list[Turn]:
        if not isinstance(body, Mapping):
            raise invalid_input(f"{where}must be a chat request object.")
        try:
            return parse_chat(
                body, model_id=model, default_max_tokens=self.config.default_max_tokens
            ).spec.messages
        except EngineError as exc:
            raise EngineError(exc.code, exc.status, f"{where}{exc.message}") from exc

    def _count(self, model: str, turns: Sequence[list[Turn]]) -> list[int]:
        tokenizer = self.tokenizers[model]
        return [len(tokenizer.tokens(each)) for each in turns]

    async def health(self, request: Request) -> Response:
        replicas = self.pool.snapshot()
        status = "ok" if all(replica["ready"] for replica in replicas) else "degraded"
        return JSONResponse({"status": status, "models": self.model_ids, "replicas": replicas})

    async def metrics(self, request: Request) -> Response:
        """The replicas and the batch queue in Prometheus text (`metrics`); the queue is read from
        its SQLite file, so the whole scrape runs off the event loop."""
        body = await asyncio.to_thread(generate_latest, self.registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    # --- answering ---

    async def _answer(self, chat: ChatRequest, model: str, request: Request, *, openai: bool) -> Response:
        affinity = request.headers.get("x-session-affinity", "")
        job = self.pool.submit(chat.spec, model=model, affinity=affinity, reject_if_busy=chat.reject_if_busy)
        try:
            first = await job.next_event()
            if isinstance(first, Failed):
                raise EngineError(first.code, first.status, first.message)
            headers = {"x-engine-replica": str(job.replica_index)}
            reply = Reply(model=model)
            if chat.stream:  # from here on the frames own the job
                usage = chat.include_usage or not openai  # /ai/run always ends with a usage frame
                frames = self._frames(job, reply, openai=openai, usage=usage)
                return StreamingResponse(frames, media_type="text/event-stream", headers=headers)
            outcome = await collect(job.events())
        except BaseException:
            job.cancel()  # the client went away (or the job failed, when this is a no-op)
            raise
        if isinstance(outcome.end, Failed):
            raise EngineError(outcome.end.code, outcome.end.status, outcome.end.message)
        completion = reply.completion(outcome.text, outcome.calls, outcome.end)
        return JSONResponse(completion if openai else envelope(completion), headers=headers)

    async def _frames(self, job: Job, reply: Reply, *, openai: bool, usage: bool) -> AsyncIterator[bytes]:
        try:
            yield sse(reply.chunk({"role": "assistant", "content": ""}))
            async for event in job.events():
                if isinstance(event, TextDelta):
                    yield sse(reply.chunk({"content": event.text}))
                elif isinstance(event, ToolCall):
                    for delta in tool_call_deltas(event):
                        yield sse(reply.chunk(delta))
                elif isinstance(event, Finished):
                    yield sse(reply.chunk({}, event))
                    if usage:
                        yield sse(reply.usage_chunk(event))
                    yield sse("[DONE]")
                elif isinstance(event, Failed):
                    yield sse(openai_error(event) if openai else error_envelope(event))
        finally:
            job.cancel()  # the client went away mid-stream, or a no-op once finished

    async def _enqueue(self, body: Mapping[str, Any], account: str, model: str) -> Response:
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            raise invalid_input("A queued request needs `requests`: a non-empty list of model inputs.")
        items: list[tuple[dict[str, Any], str | None]] = []
        for index, item in enumerate(requests):
            if not isinstance(item, dict):
                raise invalid_input(f"requests[{index}] must be an object.")
            reference = item.get("external_reference")
            if reference is not None and not isinstance(reference, str):
                raise invalid_input(f"requests[{index}].external_reference must be a string.")
            inputs = {key: value for key, value in item.items() if key != "external_reference"}
            try:
                if self._parse(inputs, account, model).stream:
                    raise invalid_input("queued requests cannot stream.")
            except EngineError as exc:
                raise EngineError(exc.code, exc.status, f"requests[{index}]: {exc.message}") from exc
            items.append((inputs, reference))
        request_id = await asyncio.to_thread(self.queue.submit, items, account, model)
        self.pool.notify_batch(model)
        return JSONResponse(envelope({"status": "queued", "request_id": request_id, "model": model}))

    async def _poll(self, request_id: Any, account: str) -> Response:
        if not isinstance(request_id, str) or not request_id:
            raise invalid_input("`request_id` must be the string returned when the batch was queued.")
        status = await asyncio.to_thread(self.queue.status, request_id, account)
        if status is None:
            raise EngineError(8001, 404, f"No queued request has request_id {request_id!r}.")
        return JSONResponse(envelope(status))


async def _routing_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 404
    message = "Method not allowed for that URI" if status == 405 else "No route for that URI"
    return _error_response(EngineError(NO_ROUTE, status, message), openai=False)


def create_app(engine: Engine) -> Starlette:
    """The HTTP app over an engine that is already open."""
    config = engine.config
    routes = [
        Route(
            f"{ACCOUNT}/ai/run/{{model:path}}", _answering_errors(engine.run, openai=False), methods=["POST"]
        ),
        Route(
            f"{ACCOUNT}/ai/v1/chat/completions",
            _answering_errors(engine.chat_completions, openai=True),
            methods=["POST"],
        ),
        Route(f"{ACCOUNT}/ai/v1/models", engine.models, methods=["GET"]),
        Route("/engine/v1/tokenize", _answering_errors(engine.tokenize, openai=True), methods=["POST"]),
        Route("/healthz", engine.health, methods=["GET"]),
        Route("/metrics", engine.metrics, methods=["GET"]),
    ]
    middleware = [Middleware(BearerAuth, token=config.api_token)] if config.api_token else []
    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={HTTPException: _routing_error},
    )
