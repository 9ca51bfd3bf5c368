"""Where a stored provider token may be sent: the base-URL policy (SSRF guard).

http(s) only; the host must not resolve to a private, loopback, link-local or otherwise
internal address unless it is the embedded engine's own address or listed in
`PROVIDER_HOST_ALLOWLIST` (host names, IPs or CIDRs). A connection is checked when it is
saved and before every request, for a message a person understands; the check that
protects is the one at connect time (`host_addresses_checked`, called by the outbound HTTP
seam's network backend): the name is resolved once, every address is checked, and the
connection goes to a checked address, so a name that answers a public address to the
check and an internal one to the connection (DNS rebinding) gets nowhere. Redirects are
never followed (see `providers.http`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
DEFAULT_PORTS = {"http": 80, "https": 443}


def base_url_validate(url: str) -> None:
    """Raise `ValidationError` with a message a person understands when `url` is not allowed."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValidationError("The base URL must start with http:// or https://.")
    if not parts.hostname:
        raise ValidationError("The base URL has no host name.")
    if parts.username or parts.password:
        raise ValidationError("Put credentials in the token field, not in the base URL.")
    try:
        port = parts.port or DEFAULT_PORTS[parts.scheme]
    except ValueError as exc:
        raise ValidationError("The base URL has an invalid port.") from exc
    host = parts.hostname.lower()
    if not _is_trusted(host, port):
        addresses_check(host, _resolve(host))


async def host_addresses_checked(host: str, port: int) -> list[IPAddress]:
    """Resolve `host` once; the addresses a connection to it may use, in resolver order.

    Raises `ValidationError` when any of them is internal (and the host is not trusted),
    `OSError` when the name does not resolve.
    """
    host = host.lower()
    addresses = await _aresolve(host, port)
    if not _is_trusted(host, port):
        addresses_check(host, addresses)
    return addresses


def addresses_check(host: str, addresses: list[IPAddress]) -> None:
    """Refuse the host if any address is internal: a name with one public and one private
    answer could be steered to either."""
    for address in addresses:
        if host_allowlisted(str(address)):
            continue
        if _is_internal(address):
            raise ValidationError(
                f"{host} points at an internal address ({address}); only public hosts are allowed. "
                "An operator can allow it with PROVIDER_HOST_ALLOWLIST."
            )


def _resolve(host: str) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        raise ValidationError(f"The host {host} cannot be resolved.") from exc
    return _addresses(infos)


async def _aresolve(host: str, port: int) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except UnicodeError as exc:
        raise OSError(f"The host {host} cannot be resolved.") from exc
    return _addresses(infos)


def _addresses(infos: Iterable[tuple[Any, ...]]) -> list[IPAddress]:
    found: list[IPAddress] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if address not in found:
            found.append(address)
    return found


def _is_internal(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return not address.is_global or address.is_multicast


def _is_trusted(host: str, port: int) -> bool:
    """The engine's own address, or a host the operator allowlisted by name or address."""
    return host_allowlisted(host) or _is_engine_address(host, port)


def _is_engine_address(host: str, port: int) -> bool:
    engine = urlsplit(settings.ENGINE_URL)
    engine_port = engine.port or DEFAULT_PORTS.get(engine.scheme)
    return (host, port) == ((engine.hostname or "").lower(), engine_port)


def host_allowlisted(host: str) -> bool:
    """Whether the operator allowlisted `host` (a lower-case name or address) by name, address or CIDR."""
    for entry in settings.PROVIDER_HOST_ALLOWLIST:
        entry = entry.strip().lower()
        if host == entry:
            return True
        try:
            if ipaddress.ip_address(host) in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            continue
    return False
