"""httpcore's network stream on the running asyncio loop's own transports, not through anyio.

httpcore's default (anyio) stream pays, per read and per write, an anyio cancel scope, an
extra trip round the event loop (a checkpoint) and a pause/resume of reading; its TLS is
Python code over memory buffers; and the pool asks every idle connection whether its socket
is readable (a `poll` call each, on every request it adds or removes). Here the loop reads
into a buffer as data arrives, so a read that finds data returns without waiting, TLS is the
loop's own (`loop.start_tls`), and a connection the server closed while idle is known from
its end of stream already received: `is_readable` needs no system call.

The stream keeps httpcore's contract: `ReadTimeout`, `WriteTimeout`, `ConnectTimeout` when a
wait passes its timeout, `ReadError`, `WriteError`, `ConnectError` when the connection fails.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections import deque
from collections.abc import Iterable
from typing import Any, cast

import httpcore

READ_BUFFER_HIGH = 256 * 1024  # reading pauses while this much is received and not yet read
WRITE_GATHER = 64 * 1024  # smaller writes wait for the next read and go out together


class _Protocol(asyncio.Protocol):
    """What the loop reports about one connection: the bytes received, the end, the failure."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.received: deque[bytes] = deque()
        self.buffered = 0
        self.eof = False
        self.lost = False
        self.error: BaseException | None = None
        self.reading_paused = False
        self.read_waiter: asyncio.Future[None] | None = None
        self.drain_waiter: asyncio.Future[None] | None = None
        self.writing_paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's do not subclass it

    def data_received(self, data: bytes) -> None:
        self.received.append(data)
        self.buffered += len(data)
        if self.buffered > READ_BUFFER_HIGH and not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()
        _wake(self.read_waiter)

    def eof_received(self) -> None:
        self.eof = True
        _wake(self.read_waiter)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.error = exc
        _wake(self.read_waiter)
        _wake(self.drain_waiter)

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        _wake(self.drain_waiter)


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


async def _wait(future: asyncio.Future[None], seconds: float | None) -> None:
    """Wait for `future`, or raise TimeoutError after `seconds` (one timer: cheaper than a scope)."""
    if seconds is None:
        await future
        return
    timer = asyncio.get_running_loop().call_later(seconds, _expire, future)
    try:
        await future
    finally:
        timer.cancel()


def _expire(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_exception(TimeoutError())


class LoopStream(httpcore.AsyncNetworkStream):
    """One connection: httpcore reads, writes and closes it; the loop fills its buffer."""

    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self._unsent: list[bytes] = []  # a request's head and body, sent together (one system call)
        self._unsent_bytes = 0

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        if self._unsent:
            self._send_gathered()
        protocol = self._protocol
        if not protocol.received and not (protocol.eof or protocol.lost):
            protocol.read_waiter = asyncio.get_running_loop().create_future()
            try:
                await _wait(protocol.read_waiter, timeout)
            except TimeoutError as exc:
                raise httpcore.ReadTimeout("no data within the read timeout") from exc
            finally:
                protocol.read_waiter = None
        if not protocol.received:
            if protocol.error is not None:
                raise httpcore.ReadError(str(protocol.error)) from protocol.error
            return b""  # the end of the stream
        chunk = protocol.received.popleft()
        if len(chunk) > max_bytes:
            chunk, rest = chunk[:max_bytes], chunk[max_bytes:]
            protocol.received.appendleft(rest)
        protocol.buffered -= len(chunk)
        if protocol.reading_paused and protocol.buffered <= READ_BUFFER_HIGH // 2:
            protocol.reading_paused = False
            self._transport.resume_reading()
        return chunk

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if not buffer:
            return
        protocol = self._protocol
        if protocol.lost or self._transport.is_closing():
            raise httpcore.WriteError("the connection is closed")
        self._unsent.append(buffer)
        self._unsent_bytes += len(buffer)
        if self._unsent_bytes < WRITE_GATHER:
            return  # httpcore reads the answer next: the read sends it
        self._send_gathered()
        if not protocol.writing_paused:
            return
        protocol.drain_waiter = asyncio.get_running_loop().create_future()
        try:
            await _wait(protocol.drain_waiter, timeout)
        except TimeoutError as exc:
            raise httpcore.WriteTimeout("could not send within the write timeout") from exc
        finally:
            protocol.drain_waiter = None
        if protocol.lost:
            raise httpcore.WriteError("the connection was lost while sending")

    def _send_gathered(self) -> None:
        """Send what `write` kept; dropped if the connection closed meanwhile (as httpcore does
        after a failed write, the read then gives what the server answered before it closed)."""
        data = self._unsent[0] if len(self._unsent) == 1 else b"".join(self._unsent)
        self._unsent, self._unsent_bytes = [], 0
        if not (self._protocol.lost or self._transport.is_closing()):
            self._transport.write(data)

    async def aclose(self) -> None:
        self._transport.abort()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109  (httpcore's interface)
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(
                    self._transport, self._protocol, ssl_context, server_hostname=server_hostname
                )
        except TimeoutError as exc:
            self._transport.abort()
            raise httpcore.ConnectTimeout("the TLS handshake timed out") from exc
        except (OSError, ssl.SSLError) as exc:
            self._transport.abort()
            raise httpcore.ConnectError(str(exc)) from exc
        if transport is None:  # the connection closed during the handshake
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        self._protocol.transport = transport
        return LoopStream(transport, self._protocol)

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":  # data or the end arrived (on an idle connection: it is stale)
            protocol = self._protocol
            return bool(protocol.received) or protocol.eof or protocol.lost
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._transport.get_extra_info("socket")
        return None


async def loop_connect_tcp(
    address: str,
    port: int,
    timeout: float | None = None,  # noqa: ASYNC109  (httpcore's interface)
    local_address: str | None = None,
    socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
) -> LoopStream:
    """A TCP connection to an IP address (already resolved and checked), as a `LoopStream`."""
    loop = asyncio.get_running_loop()
    family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for option in socket_options or ():
            sock.setsockopt(*option)
        if local_address is not None:
            sock.bind((local_address, 0))
        async with asyncio.timeout(timeout):
            await loop.sock_connect(sock, (address, port))
        transport, protocol = await loop.create_connection(_Protocol, sock=sock)
    except TimeoutError as exc:
        sock.close()
        raise httpcore.ConnectTimeout(f"connecting to port {port} timed out") from exc
    except OSError as exc:
        sock.close()
        raise httpcore.ConnectError(str(exc)) from exc
    return LoopStream(transport, protocol)
