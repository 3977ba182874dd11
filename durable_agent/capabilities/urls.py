"""Which hosts a URL from outside may reach.

A spec that may carry URLs at all (a worker policy for local development) still must
not turn the worker into a proxy for what only the worker can reach: its own loopback,
the cloud's metadata address (link-local), the private network behind it. Every address
a name resolves to is checked, so a public name pointing at ``127.0.0.1`` is refused
too. Redirects are never followed by the HTTP clients that use these URLs, so a
checked host cannot hand the request on to an unchecked one.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit


class UrlRefused(ValueError):
    """A URL the worker's policy does not let a spec reach."""


def _blocked(address: str) -> str | None:
    """Why an address is off limits, or ``None`` for a public one."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for kind in ("unspecified", "loopback", "link_local", "multicast", "private", "reserved"):
        if getattr(ip, f"is_{kind}"):
            return kind.replace("_", "-")
    return None


def url_host(url: str) -> str:
    """The URL's host, after checking it is an ``http(s)`` URL with one."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise UrlRefused(f"{url!r}: only http:// and https:// URLs are allowed")
    if not parts.hostname:
        raise UrlRefused(f"{url!r} has no host")
    return parts.hostname


async def check_url(url: str, *, private_allowed: bool) -> None:
    """Refuse ``url`` unless every address its host resolves to is public (or the
    policy allows private ones). A host that does not resolve is refused as well: it
    cannot be checked."""
    host = url_host(url)
    if private_allowed:
        return
    try:
        found = await asyncio.get_running_loop().getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError as error:
        raise UrlRefused(f"{url!r}: its host does not resolve ({error})") from None
    for *_, sockaddr in found:
        why = _blocked(str(sockaddr[0]))
        if why is not None:
            raise UrlRefused(
                f"{url!r} reaches a {why} address ({sockaddr[0]}), which this worker's "
                "policy keeps from specs"
            )


def origin(url: str) -> str:
    """Scheme, host and port: what two URLs must share to be the same service."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"
