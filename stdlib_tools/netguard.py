"""The SSRF guard of seed 002, as pure functions.

A URL is let through when its scheme is http(s), its host is not a blocked name
and every address it resolves to is public -- unless the configured allow-list
names the host or contains the address.  Numeric host spellings that
``inet_aton`` accepts (``2130706433``, ``0x7f.1``, ``0177.0.0.1``, ``127.1``)
are decoded before checking, IPv6 addresses that embed an IPv4 one
(``::ffff:127.0.0.1``, ``::127.0.0.1``, 6to4, NAT64) are checked through the
embedded address.  :func:`resolve_host` is the one resolver the guard calls
(tests monkeypatch it).
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from typing import Iterable, Sequence
from urllib.parse import urlsplit

from .errors import ToolError

__all__ = [
    "BLOCKED_HOSTNAMES",
    "BLOCKED_NETWORKS",
    "AllowList",
    "check_host",
    "check_host_async",
    "check_url",
    "check_url_async",
    "is_blocked_ip",
    "normalize_host",
    "parse_ip_literal",
    "resolve_host",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

BLOCKED_NETWORKS: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = tuple(
    ipaddress.ip_network(n) for n in (
        # seed 002
        "127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16",
        "::1/128", "fc00::/7",
        # "this network": 0.0.0.0 reaches localhost on Linux
        "0.0.0.0/8",
        # also refused: unspecified / link-local IPv6, carrier-grade NAT, broadcast, multicast
        "::/128", "fe80::/10", "100.64.0.0/10", "255.255.255.255/32", "224.0.0.0/4", "ff00::/8",
        # issue 17: the other special-purpose ranges (IANA registries), named so a reader
        # sees them; is_blocked_ip also refuses anything ipaddress does not call global
        "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
        "240.0.0.0/4", "64:ff9b:1::/48", "100::/64",
        "2001::/23", "2001:db8::/32", "fec0::/10",
    )
)

BLOCKED_HOSTNAMES = frozenset({
    "metadata.google.internal", "metadata", "metadata.goog",
})

_NUM_PART = re.compile(r"^(0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*)$")
_NUMERIC_LABEL = re.compile(r"^(0[xX][0-9a-fA-F]*|[0-9]+)$")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_6TO4 = ipaddress.ip_network("2002::/16")
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")


def normalize_host(host: str) -> str:
    """Lowercase, strip IPv6 brackets and trailing dots."""
    h = host.strip().lower()
    if h.startswith("[") and h.endswith("]"):
        h = h[1:-1]
    return h.rstrip(".")


def _parse_inet_aton(host: str) -> ipaddress.IPv4Address | None:
    """Decode every spelling ``inet_aton`` accepts; ``None`` if it is not numeric."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(_NUM_PART.match(p) for p in parts):
        return None
    try:
        nums = [int(p, 16) if p[:2].lower() == "0x" else int(p, 8) if p.startswith("0") and len(p) > 1
                else int(p) for p in parts]
    except ValueError:  # "0x" alone
        return None
    *head, last = nums
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        return None
    value = 0
    for n in head:
        value = value * 256 + n
    value = value * 256 ** (4 - len(head)) + last
    return ipaddress.IPv4Address(value)


def parse_ip_literal(host: str) -> IPAddress | None:
    """The address a host string denotes by itself, or ``None`` for a DNS name.

    Raises :class:`ToolError` ``Http.Blocked`` for numeric-looking hosts that are
    not a valid address (refusing is safer than letting a resolver guess).
    """
    h = normalize_host(host)
    if "%" in h:  # IPv6 zone id
        h = h.split("%", 1)[0]
    try:
        return ipaddress.ip_address(h)
    except ValueError:
        pass
    ip = _parse_inet_aton(h)
    if ip is not None:
        return ip
    # WHATWG URL rule: a host whose last label is a number is an IPv4 address or invalid
    if ":" in h or _NUMERIC_LABEL.match(h.rsplit(".", 1)[-1]):
        raise ToolError("Http.Blocked", f"host {host!r} is not a valid address")
    return None


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _TRANSLATED:  # SIIT ::ffff:0:a.b.c.d
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    packed = ip.packed
    if packed[:12] == b"\x00" * 12 and int(ip) > 1:  # deprecated IPv4-compatible ::a.b.c.d
        return ipaddress.IPv4Address(packed[12:])
    return None


def is_blocked_ip(ip: IPAddress | str) -> bool:
    """True when the address is private, loopback, link-local, ... (or embeds one)."""
    if isinstance(ip, str):
        ip = ipaddress.ip_address(normalize_host(ip).split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        v4 = _embedded_v4(ip)
        if v4 is not None and is_blocked_ip(v4):
            return True
    if any(ip.version == net.version and ip in net for net in BLOCKED_NETWORKS):
        return True
    # reserved, documentation, benchmarking... whatever the list misses; an address that
    # embeds an IPv4 one (::ffff:a.b.c.d, NAT64, 6to4) was judged by that address above
    return not (_embedded_v4(ip) if isinstance(ip, ipaddress.IPv6Address) and _embedded_v4(ip) else ip).is_global


class AllowList:
    """Hosts (exact or ``*.suffix``) and addresses / CIDRs let through the guard."""

    def __init__(self, entries: Iterable[str] = ()):
        self.hosts: set[str] = set()
        self.suffixes: list[str] = []
        self.networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for raw in entries:
            e = normalize_host(str(raw))
            if not e:
                continue
            try:
                self.networks.append(ipaddress.ip_network(e, strict=False))
                continue
            except ValueError:
                pass
            if e.startswith("*."):
                self.suffixes.append(e[1:])
            else:
                self.hosts.add(e)

    def allows_host(self, host: str) -> bool:
        h = normalize_host(host)
        return h in self.hosts or any(h.endswith(s) for s in self.suffixes)

    def allows_ip(self, ip: IPAddress) -> bool:
        candidates = [ip]
        if isinstance(ip, ipaddress.IPv6Address):
            v4 = _embedded_v4(ip)
            if v4 is not None:
                candidates.append(v4)
        return any(c.version == n.version and c in n for c in candidates for n in self.networks)

    def __bool__(self) -> bool:
        return bool(self.hosts or self.suffixes or self.networks)


def resolve_host(host: str, port: int | None = None) -> list[str]:
    """Every address ``host`` resolves to (``socket.getaddrinfo``)."""
    try:
        infos = socket.getaddrinfo(host, port or 0, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ToolError("Http.DnsFailure", f"cannot resolve {host!r}: {exc}") from None
    out: list[str] = []
    for info in infos:
        addr = str(info[4][0])
        if addr not in out:
            out.append(addr)
    return out


def _as_allow(allow: AllowList | Iterable[str] | None) -> AllowList:
    return allow if isinstance(allow, AllowList) else AllowList(allow or ())


def _check_literal_or_name(host: str, allow: AllowList) -> tuple[bool, list[IPAddress] | None]:
    """(allowed_by_name, addresses if the host is a literal)."""
    h = normalize_host(host)
    if not h:
        raise ToolError("Http.InvalidUrl", "the URL has no host")
    if allow.allows_host(h):
        return True, None
    if h in BLOCKED_HOSTNAMES or h.endswith(".metadata.google.internal"):
        raise ToolError("Http.Blocked", f"host {host!r} is a cloud metadata endpoint")
    ip = parse_ip_literal(h)
    return False, ([ip] if ip is not None else None)


def _check_addresses(host: str, addrs: Sequence[IPAddress | str], allow: AllowList) -> list[IPAddress]:
    if not addrs:
        raise ToolError("Http.DnsFailure", f"{host!r} resolved to no address")
    ips: list[IPAddress] = []
    for a in addrs:
        ip = a if not isinstance(a, str) else ipaddress.ip_address(a.split("%", 1)[0])
        if is_blocked_ip(ip) and not allow.allows_ip(ip):
            raise ToolError("Http.Blocked",
                            f"host {host!r} resolves to {ip}, a private or reserved address")
        ips.append(ip)
    return ips


def check_host(host: str, allow: AllowList | Iterable[str] | None = None,
               port: int | None = None) -> list[str]:
    """Resolve and check ``host``; return the addresses that may be connected to.

    An allow-listed host name returns ``[host]`` unresolved (the connection may use it).
    """
    allow = _as_allow(allow)
    by_name, ips = _check_literal_or_name(host, allow)
    if by_name:
        return [normalize_host(host)]
    if ips is None:
        ips = resolve_host(normalize_host(host), port)  # type: ignore[assignment]
    return [str(i) for i in _check_addresses(host, ips, allow)]


async def check_host_async(host: str, allow: AllowList | Iterable[str] | None = None,
                           port: int | None = None) -> list[str]:
    """:func:`check_host` with DNS resolution in a worker thread."""
    allow = _as_allow(allow)
    by_name, ips = _check_literal_or_name(host, allow)
    if by_name:
        return [normalize_host(host)]
    if ips is None:
        ips = await asyncio.to_thread(resolve_host, normalize_host(host), port)  # type: ignore[arg-type]
    return [str(i) for i in _check_addresses(host, ips, allow)]


def _split_url(url: str) -> tuple[str, int | None]:
    try:
        parts = urlsplit(str(url))
        port = parts.port
    except ValueError as exc:
        raise ToolError("Http.InvalidUrl", f"invalid URL {url!r}: {exc}") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ToolError("Http.Blocked", f"scheme {parts.scheme!r} is not allowed (http, https only)")
    host = parts.hostname or ""
    if not host:
        raise ToolError("Http.InvalidUrl", f"URL {url!r} has no host")
    return host, port or (443 if parts.scheme.lower() == "https" else 80)


def check_url(url: str, allow: AllowList | Iterable[str] | None = None) -> list[str]:
    """Check a URL (scheme, host name, resolved addresses); raise ``ToolError`` if refused."""
    host, port = _split_url(url)
    return check_host(host, allow, port)


async def check_url_async(url: str, allow: AllowList | Iterable[str] | None = None) -> list[str]:
    host, port = _split_url(url)
    return await check_host_async(host, allow, port)
