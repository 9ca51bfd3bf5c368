"""Where a stored provider token may be sent: the base-URL policy (SSRF guard).

http(s) only; the host must not resolve to a private, loopback, link-local or otherwise
internal address unless it is the embedded engine's own address or listed in
`PROVIDER_HOST_ALLOWLIST` (host names, IPs or CIDRs). The check resolves the name, so it
runs when a connection is saved and again before every request (a name can be re-pointed
after it was saved). Redirects are never followed (see `providers.http`).
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def base_url_validate(url: str) -> None:
    """Raise `ValidationError` with a message a person understands when `url` is not allowed."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValidationError("The base URL must start with http:// or https://.")
    if not parts.hostname:
        raise ValidationError("The base URL has no host name.")
    if parts.username or parts.password:
        raise ValidationError("Put credentials in the token field, not in the base URL.")
    host = parts.hostname.lower()
    if _is_allowlisted(host) or _is_engine_address(parts.hostname, parts.port):
        return
    for address in _resolve(host):
        if _is_allowlisted(str(address)):
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
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


def _is_internal(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return not address.is_global or address.is_multicast


def _is_engine_address(host: str, port: int | None) -> bool:
    engine = urlsplit(settings.ENGINE_URL)
    return (host.lower(), port) == ((engine.hostname or "").lower(), engine.port)


def _is_allowlisted(host: str) -> bool:
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
