"""What the seam's custom network backend relies on inside httpx and httpcore, and the way back.

httpx has no public option for a network backend: the seam replaces its transport's private
`_pool`, and the loop's own stream tells httpcore that an idle connection went stale through
the `is_readable` question httpcore asks it. An upgrade that renamed either would leave the
address check out, or reuse closed connections, silently: these tests fail instead.
`UPSTREAM_LOOP_STREAM=0` goes back to httpcore's own (anyio) stream, the address still checked.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpcore
import httpx
import pytest
from django.conf import LazySettings

from playground.providers import http as seam
from playground.providers.http import CheckedAddressBackend, checked_transport, upstream_stream
from playground.providers.sockets import LoopStream
from tests.fakes.upstream import FakeUpstream, json_reply


@pytest.fixture(autouse=True)
def _loopback_allowed(settings: LazySettings) -> None:
    settings.PROVIDER_HOST_ALLOWLIST = ["127.0.0.1"]


def test_httpx_transports_still_keep_their_pool_in_the_private_attribute_the_seam_replaces() -> None:
    transport = httpx.AsyncHTTPTransport()
    assert isinstance(vars(transport).get("_pool"), httpcore.AsyncConnectionPool)

    (checked,) = checked_transport(httpx.Limits(max_connections=4), pools=1)._transports  # type: ignore[attr-defined]
    assert isinstance(checked._pool._network_backend, CheckedAddressBackend)


async def test_requests_through_the_seams_transport_connect_through_the_checked_backend(
    fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    hosts: list[str] = []
    connect = CheckedAddressBackend.connect_tcp

    async def counted(self: CheckedAddressBackend, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        hosts.append(host)
        return await connect(self, host, port, *args, **kwargs)

    monkeypatch.setattr(CheckedAddressBackend, "connect_tcp", counted)
    fake_upstream.script(json_reply({"ok": 1}))
    async with httpx.AsyncClient(transport=checked_transport(httpx.Limits(max_connections=4))) as client:
        assert (await client.post(fake_upstream.url + "/v1/x", json={})).json() == {"ok": 1}

    assert hosts == ["127.0.0.1"]  # not httpx's own pool, which would skip the address check


async def test_httpcore_still_asks_an_idle_loop_stream_whether_it_went_stale(
    fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    real = LoopStream.get_extra_info

    def recorded(self: LoopStream, info: str) -> Any:
        asked.append(info)
        return real(self, info)

    monkeypatch.setattr(LoopStream, "get_extra_info", recorded)
    fake_upstream.script(json_reply({"ok": 1}), json_reply({"ok": 2}))
    async with httpx.AsyncClient(transport=checked_transport(httpx.Limits(max_connections=4))) as client:
        for _ in range(2):
            await client.post(fake_upstream.url + "/v1/x", json={})

    assert "is_readable" in asked  # the pooled connection was checked before its reuse


async def test_with_the_loop_stream_switched_off_the_pooled_client_answers_on_httpcores_stream(
    fake_upstream: FakeUpstream, settings: LazySettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.UPSTREAM_LOOP_STREAM = False
    streams: list[httpcore.AsyncNetworkStream] = []
    connect = httpcore.AnyIOBackend.connect_tcp

    async def recorded(self: httpcore.AnyIOBackend, *args: Any, **kwargs: Any) -> Any:
        streams.append(await connect(self, *args, **kwargs))
        return streams[-1]

    async def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the loop's own stream is switched off")

    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", recorded)
    monkeypatch.setattr(seam, "loop_connect_tcp", refused)
    fake_upstream.script(json_reply({"ok": 1}), json_reply({"ok": 2}))

    # A client of a loop of its own: this loop's may have been made with the switch on.
    async def two_requests() -> list[bytes]:
        bodies = []
        for _ in range(2):
            async with upstream_stream("POST", fake_upstream.url + "/v1/x", headers={}, json={}) as answer:
                bodies.append(await answer.read())
        return bodies

    bodies = await asyncio.to_thread(asyncio.run, two_requests())

    assert [httpx.Response(200, content=body).json() for body in bodies] == [{"ok": 1}, {"ok": 2}]
    assert len(streams) == 2  # the client's pools are taken in turn: a connection each
    assert not any(isinstance(stream, LoopStream) for stream in streams)
