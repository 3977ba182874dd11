"""Which hosts a URL from outside may reach.

A spec that may carry URLs at all (a worker policy for local development) still must
not turn the worker into a proxy for what only the worker can reach: its own loopback,
the cloud's metadata services, the private and shared networks behind it. An address is
reachable only when it is globally routable (``ipaddress``'s ``is_global``), and so is
any IPv4 address an IPv6 one carries inside it (6to4, Teredo, NAT64, mapped); the
metadata services' names are refused whatever they resolve to. Every address a name
resolves to is checked, so a public name pointing at ``127.0.0.1`` is refused too.
Redirects are never followed by the HTTP clients that use these URLs, so a checked host
cannot hand the request on to an unchecked one.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from durable_agent._errors import DurableAgentError


class UrlRefused(DurableAgentError, ValueError):
    """A URL the worker's policy does not let a spec reach."""


#: Cloud metadata services by name (their addresses are link-local or shared, which
#: the address check refuses too).
METADATA_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.internal",
        "metadata.tencentyun.com",
        "metadata.oraclecloud.com",
    }
)
#: Ranges ``is_global`` counts as global that are not hosts on the internet: IETF
#: protocol assignments, and local-use NAT64.
NOT_HOSTS = (ipaddress.ip_network("192.0.0.0/24"), ipaddress.ip_network("64:ff9b:1::/48"))
NAT64 = ipaddress.ip_network("64:ff9b::/96")
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _inside(ip: Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (mapped, 6to4, Teredo, NAT64)."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return []
    found = [a for a in (ip.ipv4_mapped, ip.sixtofour) if a is not None]
    if ip.teredo is not None:
        found += list(ip.teredo)
    if ip in NAT64:
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return found


def _blocked(address: str) -> tuple[str, str] | None:
    """What kind of address is off limits, and which (an IPv4 one an IPv6 address
    carries, when that is the one); ``None`` for a public address."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    for carried in _inside(ip):
        inner = _blocked(str(carried))
        if inner is not None:
            return inner[0], f"{carried} inside {ip}"
    kinds = ("unspecified", "loopback", "link_local", "site_local", "multicast", "private")
    for kind in (*kinds, "reserved"):
        # (site-local, fec0::/10, is deprecated but still routed inside some networks,
        # and ``is_global`` counts it as global; IPv4 addresses have no such attribute)
        if getattr(ip, f"is_{kind}", False):
            return kind.replace("_", "-"), str(ip)
    if ip.is_global and not any(ip in network for network in NOT_HOSTS):
        return None
    return "non-public", str(ip)


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
    if host.lower().rstrip(".") in METADATA_NAMES:
        raise UrlRefused(f"{url!r} names a cloud metadata service, which specs may not reach")
    try:
        found = await asyncio.get_running_loop().getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError as error:
        raise UrlRefused(f"{url!r}: its host does not resolve ({error})") from None
    for *_, sockaddr in found:
        blocked = _blocked(str(sockaddr[0]))
        if blocked is not None:
            kind, which = blocked
            raise UrlRefused(
                f"{url!r} reaches a {kind} address ({which}), which this worker's policy "
                "keeps from specs"
            )


#: A host name as every client reads it alike: letters, digits and hyphens in dot-separated
#: labels, the last starting with a letter (so no number is read as an address).
_HOST_NAME = re.compile(
    r"(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?"
)


def canonical_url(url: str) -> str | None:
    """``url`` rebuilt from what this worker read of it, or ``None`` when another reader
    might read it otherwise: no backslash, space or other character outside printable
    ASCII, no user info, and a host that is a plain name or an address in its usual
    form (a host such as ``2852039166`` or ``0x7f.1`` is an address to some clients and
    a name to others). What is handed on is the URL rebuilt (scheme, host, port, path
    with its escapes and dot segments resolved, query), never the text as given, so the
    host that was checked is the host that is read."""
    if not url.isascii() or any(c == "\\" or not c.isprintable() or c.isspace() for c in url):
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host or "@" in parts.netloc:
        return None
    try:
        host = str(ipaddress.ip_address(host))
    except ValueError:
        if not _HOST_NAME.fullmatch(host.rstrip(".")):
            return None
    return rebuilt(parts.scheme, host, port, normalised_path(parts.path), parts.query)


def rebuilt(scheme: str, host: str, port: int | None, path: str, query: str) -> str:
    """A URL from the parts a check read: no user info, no fragment, the path escaped."""
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    return urlunsplit((scheme, netloc, quote(path), query, ""))


def origin(url: str) -> str:
    """Scheme, host and port: what two URLs must share to be the same service."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"


def normalised_path(path: str) -> str:
    """A URL path as a server would read it at worst: percent-escapes decoded until none
    is left (``%252e`` is ``%2e`` to one server and ``.`` to the next), backslashes
    read as slashes, and dot segments resolved. What an origin entry's path must
    prefix."""
    for _ in range(4):
        decoded = unquote(path)
        if decoded == path:
            break
        path = decoded
    segments: list[str] = []
    for segment in path.replace("\\", "/").split("/"):
        if segment == "..":
            if len(segments) > 1:
                segments.pop()
        elif segment != ".":
            segments.append(segment)
    normal = "/".join(segments)
    return normal if normal.startswith("/") else "/" + normal


def under(path: str, prefix: str) -> bool:
    """``path`` is ``prefix`` or inside it (``/public`` holds ``/public/a``, not
    ``/publicity``)."""
    if path == prefix or prefix in ("", "/"):
        return True
    return path.startswith(prefix if prefix.endswith("/") else prefix + "/")


def without_secrets(url: str) -> str:
    """``url`` as a log line may show it: no user info, query or fragment (a signed
    link's token lives there)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
