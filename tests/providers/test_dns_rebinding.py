"""The seam connects only to addresses it checked, resolving each name once (issue 8 B)."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import pytest

from playground.providers.adapters import ChatRequest
from playground.providers.adapters.openai_compat import OpenAICompatAdapter
from playground.providers.events import UpstreamError
from playground.providers.http import UpstreamHTTPError, upstream_stream
from playground.providers.urls_policy import base_url_validate
from tests.fakes.certificates import self_signed_certificate
from tests.fakes.dns import FakeDNS
from tests.fakes.upstream import FakeUpstream, collect

PUBLIC = "93.184.215.14"  # a public address: only ever returned by the fake resolver, never connected to
TOKEN = "sk-rebinding-canary-0123456789"
REQUEST = ChatRequest(model="m", messages=[{"role": "user", "content": "Hi"}])


async def test_a_name_that_rebinds_to_an_internal_address_after_the_check_gets_no_request(
    fake_upstream: FakeUpstream, fake_dns: FakeDNS, settings: Any
) -> None:
    settings.PROVIDER_HOST_ALLOWLIST = []
    fake_dns.answer("rebind.test", [PUBLIC], ["127.0.0.1"])  # TTL 0: public for the check, then loopback
    base_url = f"http://rebind.test:{fake_upstream.port}/v1"
    base_url_validate(base_url)  # what `adapter_for` checks before each request: it passes

    events = await collect(OpenAICompatAdapter(base_url=base_url, token=TOKEN).stream(REQUEST))

    assert fake_upstream.requests == [], "the token reached an internal address"
    assert len(events) == 1 and isinstance(events[0], UpstreamError)
    assert events[0].code == "address_not_allowed"
    assert "rebind.test points at an internal address (127.0.0.1)" in events[0].message


async def test_it_resolves_once_connects_to_that_address_and_keeps_the_host_name(
    fake_upstream: FakeUpstream, fake_dns: FakeDNS, settings: Any
) -> None:
    settings.PROVIDER_HOST_ALLOWLIST = ["127.0.0.1"]  # the address is allowed, not the name
    fake_dns.answer("upstream.test", ["127.0.0.1"])

    url = f"http://upstream.test:{fake_upstream.port}/v1/x"
    async with upstream_stream("POST", url, headers={}, json={}):
        pass

    assert fake_dns.lookups["upstream.test"] == 1
    assert fake_upstream.requests[0].headers["host"] == f"upstream.test:{fake_upstream.port}"


async def test_tls_still_names_the_host_for_sni_when_the_address_is_pinned(
    fake_dns: FakeDNS, settings: Any, tmp_path: Path
) -> None:
    settings.PROVIDER_HOST_ALLOWLIST = ["127.0.0.1"]
    fake_dns.answer("tls.test", ["127.0.0.1"])
    server_names: list[str | None] = []
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*self_signed_certificate(tmp_path, "tls.test"))
    context.sni_callback = lambda _sock, name, _ctx: server_names.append(name)
    server = await asyncio.start_server(_close, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]

    async with server:
        with pytest.raises(UpstreamHTTPError):  # our CA store does not trust the test certificate
            async with upstream_stream("GET", f"https://tls.test:{port}/", headers={}):
                pass

    assert server_names == ["tls.test"]


async def _close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.close()
