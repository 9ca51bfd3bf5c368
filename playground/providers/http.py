"""The one outbound HTTP seam: every request to an upstream provider goes through here.

Owns a pooled `httpx.AsyncClient` per event loop (tests, Channels and Celery each run their
own loops, and an httpx client must not cross loops), applies explicit timeouts from
settings, never follows redirects (a redirect could carry a stored key to another host),
ignores proxy and netrc settings from the environment, and turns every failure into
`UpstreamHTTPError`. Nothing here logs headers, URLs or bodies: only the host, the status
and the elapsed time, so tokens cannot leak into logs.

Every new connection is opened by `CheckedAddressBackend`: it resolves the host once,
checks every address against the base-URL policy, and connects to a checked address, on the
running loop's own transports (`sockets.LoopStream`, cheaper than httpcore's anyio streams;
`UPSTREAM_LOOP_STREAM=0` connects with httpcore's own network backend instead, the address
still checked).
httpcore still uses the URL's host for TLS SNI and certificate checks, and httpx for the
`Host` header, so pinning the address changes nothing else (DNS rebinding, issue 8 B).

Timeouts:
- `UPSTREAM_CONNECT_TIMEOUT`: opening the TCP/TLS connection;
- `UPSTREAM_FIRST_TOKEN_TIMEOUT`: the longest silence allowed on the socket, which bounds
  the wait for the response headers and the first event (and any later stall);
- `UPSTREAM_TOTAL_TIMEOUT`: a deadline for the whole exchange, checked around every read.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from http import HTTPStatus
from typing import Any

import httpcore
import httpx
from django.conf import settings
from django.core.exceptions import ValidationError

from playground.providers.sockets import loop_connect_tcp
from playground.providers.urls_policy import host_addresses_checked

logger = logging.getLogger(__name__)

REQUEST_ID_HEADERS = ("cf-ray", "cf-aig-log-id", "x-request-id")
ERROR_BODY_LIMIT = 16_384
POOLS = 4  # connection pools per client (`PoolShards`)

_clients: dict[asyncio.AbstractEventLoop, tuple[httpx.AsyncClient, AsyncGenerator[None]]] = {}


class UpstreamHTTPError(Exception):
    """An upstream call failed: an error status, a transport failure or a timeout.

    `retryable` says whether the same request may be sent again (408/429/5xx, connect
    failures, timeouts); the retry layer still refuses once any event reached the caller.
    `body` is the raw (truncated) error body for the adapter to parse; it may contain
    secrets echoed by the upstream and must be redacted before it is shown or stored.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str = "",
        retry_after: float | None = None,
        is_timeout: bool = False,
        retryable: bool = False,
        body: str = "",
        request_id: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.retry_after = retry_after
        self.is_timeout = is_timeout
        self.retryable = retryable
        self.body = body
        self.request_id = request_id


@dataclass(frozen=True)
class TimeoutPolicy:
    connect: float
    first_byte: float
    total: float

    @classmethod
    def from_settings(cls) -> TimeoutPolicy:
        return cls(
            connect=settings.UPSTREAM_CONNECT_TIMEOUT,
            first_byte=settings.UPSTREAM_FIRST_TOKEN_TIMEOUT,
            total=settings.UPSTREAM_TOTAL_TIMEOUT,
        )

    def deadline(self) -> float:
        """The event-loop time by which the whole exchange (retries included) must end."""
        return asyncio.get_running_loop().time() + self.total


class UpstreamResponse:
    """A successful (2xx) upstream response whose body is read under the deadline."""

    def __init__(self, response: httpx.Response, deadline: float) -> None:
        self._response = response
        self._deadline = deadline
        self.status = response.status_code
        self.headers = response.headers

    @property
    def is_event_stream(self) -> bool:
        content_type: str = self.headers.get("content-type", "")
        return content_type.lower().startswith("text/event-stream")

    @property
    def request_id(self) -> str:
        return request_id_from(self._response)

    async def chunks(self) -> AsyncGenerator[bytes]:
        """The body as it arrives (content decoding undone), each read under the deadline."""
        chunks = self._response.aiter_bytes()
        while True:
            try:
                async with asyncio.timeout_at(self._deadline):
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                return
            except (TimeoutError, httpx.TransportError) as exc:
                raise transport_error(exc, request_id=self.request_id) from exc
            yield chunk

    async def read(self) -> bytes:
        try:
            async with asyncio.timeout_at(self._deadline):
                return await self._response.aread()
        except (TimeoutError, httpx.TransportError) as exc:
            raise transport_error(exc, request_id=self.request_id) from exc


@asynccontextmanager
async def upstream_stream(
    method: str,
    url: str,
    *,
    headers: dict[str, str],
    json: Any = None,
    content: bytes | None = None,
    timeout_policy: TimeoutPolicy | None = None,
    deadline: float | None = None,
) -> AsyncIterator[UpstreamResponse]:
    """Send one request and hand back the streaming response; the stream closes on exit.
    `content` sends these exact bytes instead of `json` (a signed body must be sent as signed).

    Raises `UpstreamHTTPError` for transport failures, timeouts and any non-2xx status
    (redirects included: they are refused, not followed).
    """
    policy = timeout_policy or TimeoutPolicy.from_settings()
    if deadline is None:
        deadline = policy.deadline()
    client = await pooled_client()
    request = client.build_request(
        method,
        _parsed_url(url),
        headers=headers,
        json=json,
        content=content,
        timeout=httpx.Timeout(policy.first_byte, connect=policy.connect, pool=policy.connect),
    )
    started = time.perf_counter()
    try:
        async with asyncio.timeout_at(deadline):
            response = await client.send(request, stream=True)
    except (TimeoutError, httpx.TransportError) as exc:
        logger.info("upstream %s %s failed: %s", method, request.url.host, type(exc).__name__)
        raise transport_error(exc) from exc
    logger.debug(
        "upstream %s %s -> %s after %.0f ms",
        method,
        request.url.host,
        response.status_code,
        (time.perf_counter() - started) * 1000,
    )
    try:
        if not response.is_success:
            raise await status_error(response, deadline)
        yield UpstreamResponse(response, deadline)
    finally:
        await response.aclose()


@functools.lru_cache(maxsize=1024)
def _parsed_url(url: str) -> httpx.URL:
    """A connection's URL parsed once, not at every call (httpx.URL is immutable)."""
    return httpx.URL(url)


async def pooled_client() -> httpx.AsyncClient:
    """The client for the running loop, created on first use and closed with the loop."""
    loop = asyncio.get_running_loop()
    if loop not in _clients:
        for stale in [known for known in _clients if known.is_closed()]:
            del _clients[stale]  # a loop closed without shutdown_asyncgens(); nothing left to await
        client = httpx.AsyncClient(
            follow_redirects=False,
            trust_env=False,
            transport=checked_transport(
                httpx.Limits(max_connections=512, max_keepalive_connections=64), pools=POOLS
            ),
        )
        client._cookies = _CookiesRefused()  # the setter would copy it into a plain jar
        keeper = _close_with_loop(loop, client)
        _clients[loop] = (client, keeper)
        await anext(keeper)
    return _clients[loop][0]


class _CookiesRefused(httpx.Cookies):
    """The client's jar, never filled: one client carries every team's calls, so a cookie one
    upstream answer set must not go with the next request to that host (and reading each
    answer's `Set-Cookie` for the jar cost about 5% of an upstream call's event-loop time)."""

    def extract_cookies(self, response: httpx.Response) -> None:
        pass


async def _close_with_loop(
    loop: asyncio.AbstractEventLoop, client: httpx.AsyncClient
) -> AsyncGenerator[None]:
    """Stays suspended while the loop lives; `loop.shutdown_asyncgens()` (run by `asyncio.run`,
    asgiref and pytest-asyncio) closes it, which closes the client's pooled connections."""
    try:
        yield
    finally:
        _clients.pop(loop, None)
        await client.aclose()


class CheckedAddressBackend(httpcore.AsyncNetworkBackend):
    """Connects only to addresses the base-URL policy checked, resolving each name once: on the
    loop's own transports, or with `UPSTREAM_LOOP_STREAM` off on httpcore's own backend."""

    def __init__(self) -> None:
        self._connect: _Connect = loop_connect_tcp
        if not settings.UPSTREAM_LOOP_STREAM:
            self._connect = httpcore.AnyIOBackend().connect_tcp  # httpcore's default on asyncio

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109  (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                addresses = await host_addresses_checked(host, port)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"resolving {host} timed out") from exc
        except OSError as exc:
            raise httpcore.ConnectError(f"{host} cannot be resolved") from exc
        except ValidationError as exc:
            logger.warning("refused to connect to %s: it resolves to an internal address", host)
            raise UpstreamHTTPError(" ".join(exc.messages), code="address_not_allowed") from exc
        failure: httpcore.ConnectError | httpcore.ConnectTimeout | None = None
        for address in addresses:
            try:
                return await self._connect(str(address), port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        raise failure or httpcore.ConnectError(f"{host} has no address")

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109  (httpcore's interface)
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not used for upstream calls")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


type _Connect = Callable[
    [str, int, float | None, str | None, Iterable[httpcore.SOCKET_OPTION] | None],
    Awaitable[httpcore.AsyncNetworkStream],
]


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The one verifying TLS context every client shares (it holds no per-connection state).

    Building one loads the whole CA bundle (20-70 ms of CPU), and a client is made per event
    loop: a Celery batch step runs its own loop, so a context per client cost each step that
    much again, twice (httpx's transport builds one that its pool replacement then dropped).
    """
    return httpx.create_ssl_context(trust_env=False)


def checked_transport(limits: httpx.Limits, *, pools: int = 1) -> httpx.AsyncBaseTransport:
    """httpx's own transport over `pools` connection pools that open connections through
    `CheckedAddressBackend`, `limits` shared evenly among them (`PoolShards`)."""
    shared = httpx.Limits(
        max_connections=_share(limits.max_connections, pools),
        max_keepalive_connections=_share(limits.max_keepalive_connections, pools),
        keepalive_expiry=limits.keepalive_expiry,
    )
    return PoolShards([_checked_pool_transport(shared) for _ in range(pools)])


def _share(limit: int | None, pools: int) -> int | None:
    return None if limit is None else max(1, limit // pools)


def _checked_pool_transport(limits: httpx.Limits) -> httpx.AsyncHTTPTransport:
    """httpx has no public option for the network backend, so the pool its transport builds is
    replaced with one built with the same settings plus the backend. `_pool` is private: an
    upgrade that renames it would leave the address check out silently, which
    tests/providers/test_pool_backend.py guards against."""
    transport = httpx.AsyncHTTPTransport(verify=_tls_context(), trust_env=False, limits=limits)
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=_tls_context(),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=CheckedAddressBackend(),
    )
    return transport


class PoolShards(httpx.AsyncBaseTransport):
    """Requests handed to a few connection pools in turn, instead of to one.

    httpcore's pool scans all its connections whenever a request starts or ends, and for
    each idle one counts all of them again: with the 16 to 64 connections a busy gateway
    keeps, that scan took a fifth of an upstream call's event-loop time. Pools a quarter the
    size scan a quarter (and count a sixteenth) as much; taking them in turn keeps them
    evenly used, so each keeps about its share of the connections.
    """

    def __init__(self, transports: list[httpx.AsyncHTTPTransport]) -> None:
        self._transports = transports
        self._next = itertools.cycle(transports)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await next(self._next).handle_async_request(request)

    async def aclose(self) -> None:
        for transport in self._transports:
            await transport.aclose()


def request_id_from(response: httpx.Response) -> str:
    for name in REQUEST_ID_HEADERS:
        value: str = response.headers.get(name, "")
        if value:
            return value
    return ""


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


async def status_error(response: httpx.Response, deadline: float) -> UpstreamHTTPError:
    status = response.status_code
    body = b""
    try:
        async with asyncio.timeout_at(deadline):
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) >= ERROR_BODY_LIMIT:
                    break
    except (TimeoutError, httpx.TransportError):
        pass  # the status alone is enough to report the error
    if response.is_redirect:
        message = f"The upstream answered with a redirect ({status}); redirects are not followed."
    else:
        message = f"The upstream answered {status} {_phrase(status)}."
    return UpstreamHTTPError(
        message,
        status=status,
        retry_after=parse_retry_after(response.headers.get("retry-after")),
        retryable=status in (408, 429) or status >= 500,
        body=body[:ERROR_BODY_LIMIT].decode("utf-8", errors="replace"),
        request_id=request_id_from(response),
    )


def transport_error(exc: BaseException, *, request_id: str = "") -> UpstreamHTTPError:
    """Map a timeout or transport failure; the text names no URL, header or body."""
    if isinstance(exc, TimeoutError):
        message, is_timeout = "The upstream did not finish within the total time limit.", True
    elif isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
        message, is_timeout = "Timed out connecting to the upstream.", True
    elif isinstance(exc, httpx.TimeoutException):
        message, is_timeout = "The upstream stopped sending data (read timeout).", True
    elif isinstance(exc, httpx.ConnectError):
        message, is_timeout = "Could not connect to the upstream.", False
    else:
        message, is_timeout = f"The connection to the upstream failed ({type(exc).__name__}).", False
    return UpstreamHTTPError(
        message,
        code="timeout" if is_timeout else "connection_error",
        is_timeout=is_timeout,
        retryable=True,
        request_id=request_id,
    )


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""
