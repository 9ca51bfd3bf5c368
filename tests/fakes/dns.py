"""Scripted answers for made-up host names under `.test`, in front of the real resolver.

DNS rebinding needs a name whose answer changes between two lookups; no real name on this
machine does that, and tests may not use the network. `FakeDNS` answers `socket.getaddrinfo`
for the names it was given (the next scripted answer per lookup, the last one repeating)
and passes every other name to the real resolver. Everything above the resolver — the
policy, httpcore, anyio, the sockets — runs for real.

    fake_dns.answer("rebind.test", ["93.184.215.14"], ["127.0.0.1"])   # 1st lookup, then the rest
    fake_dns.lookups["rebind.test"]                                     # how many lookups so far
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest


class FakeDNS:
    def __init__(self) -> None:
        self.answers: dict[str, list[list[str]]] = {}
        self.lookups: dict[str, int] = {}
        self._real = socket.getaddrinfo

    def answer(self, name: str, *answers: list[str]) -> None:
        self.answers[name] = list(answers)
        self.lookups[name] = 0

    def getaddrinfo(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        name = host.decode() if isinstance(host, bytes) else host
        if name not in self.answers:
            return self._real(host, port, *args, **kwargs)
        scripted = self.answers[name]
        addresses = scripted[min(self.lookups[name], len(scripted) - 1)]
        self.lookups[name] += 1
        port_number = int(port or 0)
        return [
            (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port_number))
            for address in addresses
        ]


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDNS]:
    dns = FakeDNS()
    monkeypatch.setattr(socket, "getaddrinfo", dns.getaddrinfo)
    yield dns
