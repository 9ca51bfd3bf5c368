"""The seam's network stream on the loop's own transports: reuse, staleness, timeouts, TLS, large bodies."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest

from playground.providers.http import checked_transport
from playground.providers.sockets import READ_BUFFER_HIGH, WRITE_GATHER, loop_connect_tcp
from tests.fakes.certificates import self_signed_certificate

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
REPLY = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 5\r\n\r\nhello"


@pytest.fixture(autouse=True)
def _loopback_allowed(settings: Any) -> None:
    settings.PROVIDER_HOST_ALLOWLIST = ["127.0.0.1"]


@asynccontextmanager
async def serving(handler: Handler, **options: Any) -> AsyncIterator[tuple[int, list[int]]]:
    """A loopback server on this loop: its port, and how many connections it accepted (a list of one)."""
    accepted = [0]

    async def counted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted[0] += 1
        try:
            await handler(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(counted, "127.0.0.1", 0, **options)
    async with server:
        yield server.sockets[0].getsockname()[1], accepted


def client(timeout: float = 5.0) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=checked_transport(httpx.Limits(max_connections=8, max_keepalive_connections=8)),
        timeout=timeout,
    )


async def answer_each(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while await reader.readuntil(b"\r\n\r\n"):
        writer.write(REPLY)
        await writer.drain()


async def answer_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One answer, then the connection closed without a `connection: close` (an idle timeout)."""
    await reader.readuntil(b"\r\n\r\n")
    writer.write(REPLY)
    await writer.drain()


async def test_a_kept_connection_is_reused() -> None:
    async with serving(answer_each) as (port, accepted), client() as http:
        for _ in range(3):
            assert (await http.get(f"http://127.0.0.1:{port}/")).text == "hello"

    assert accepted[0] == 1


async def test_a_pooled_connection_the_server_closed_is_not_reused() -> None:
    async with serving(answer_once) as (port, accepted), client() as http:
        assert (await http.get(f"http://127.0.0.1:{port}/")).text == "hello"
        await asyncio.sleep(0.05)  # the server's close reaches the idle pooled connection

        assert (await http.get(f"http://127.0.0.1:{port}/")).text == "hello"

    assert accepted[0] == 2


async def test_a_silent_upstream_is_a_read_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    async with serving(silent) as (port, _), client(timeout=0.2) as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.get(f"http://127.0.0.1:{port}/")


async def test_a_connection_cut_mid_answer_is_an_error_not_a_short_answer() -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nhalf")
        await writer.drain()

    async with serving(cut) as (port, _), client() as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get(f"http://127.0.0.1:{port}/")


async def test_a_refused_connection_is_a_connect_error() -> None:
    server = await asyncio.start_server(answer_each, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()

    with pytest.raises(httpcore.ConnectError):
        await loop_connect_tcp("127.0.0.1", port, timeout=1.0)


async def test_a_body_larger_than_the_read_buffer_arrives_whole_in_order() -> None:
    body = bytes(range(256)) * (4 * READ_BUFFER_HIGH // 256)

    async def large(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()

    received = bytearray()
    async with (
        serving(large) as (port, _),
        client() as http,
        http.stream("GET", f"http://127.0.0.1:{port}/") as response,
    ):
        async for chunk in response.aiter_raw():
            received += chunk
            await asyncio.sleep(0)  # a slow reader: the server fills the buffer meanwhile

    assert received == body


async def test_tls_connections_verify_the_certificate_and_carry_the_answer(tmp_path: Path) -> None:
    cert, key = self_signed_certificate(tmp_path, "tls.test")
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    trusting = ssl.create_default_context(cafile=cert)

    async with serving(answer_each, ssl=server_context) as (port, _):
        stream = await loop_connect_tcp("127.0.0.1", port, timeout=2.0)
        tls = await stream.start_tls(trusting, server_hostname="tls.test", timeout=2.0)
        await tls.write(b"GET / HTTP/1.1\r\nhost: tls.test\r\n\r\n", timeout=2.0)
        assert await tls.read(65536, timeout=2.0) == REPLY
        assert tls.get_extra_info("ssl_object") is not None
        await tls.aclose()

        stream = await loop_connect_tcp("127.0.0.1", port, timeout=2.0)
        with pytest.raises(httpcore.ConnectError):  # the name does not match the certificate
            await stream.start_tls(trusting, server_hostname="other.test", timeout=2.0)


@pytest.mark.parametrize("size", [10, WRITE_GATHER - 200, 3 * WRITE_GATHER])
async def test_a_request_head_and_body_reach_the_server_whole_gathered_or_not(size: int) -> None:
    body = bytes(range(256)) * (size // 256) + b"x" * (size % 256)

    async def echo_length(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        received = await reader.readexactly(length)
        answer = b"%d %d" % (len(received), received == body)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(answer) + answer)
        await writer.drain()

    async with serving(echo_length) as (port, _), client() as http:
        response = await http.post(f"http://127.0.0.1:{port}/", content=body)

    assert response.text == f"{size} 1"


async def test_requests_take_the_pools_in_turn_and_each_pool_reuses_its_connection() -> None:
    limits = httpx.Limits(max_connections=8, max_keepalive_connections=8)
    async with (
        serving(answer_each) as (port, accepted),
        httpx.AsyncClient(transport=checked_transport(limits, pools=2)) as http,
    ):
        for _ in range(6):
            assert (await http.get(f"http://127.0.0.1:{port}/")).text == "hello"

    assert accepted[0] == 2
