"""Where the service may send a request (forwards today; connections and alert channels
next): the rules, without I/O. outbound.py resolves, applies them to every address and
connects to the address it checked.

A destination URL is http(s) with a host in its plain spelling: a name of letters, digits,
hyphens and underscores; an IPv4 address as four decimal numbers; or an IPv6 address in
brackets. Percent-encoding, a trailing dot, a zone id and the other IPv4 numerals resolvers
accept (2130706433, 0x7f.1, 0177.0.0.1, 127.1) are refused: each is a second spelling of an
address that a check on the first spelling would miss.

The policy (KEYSTORE_HOOK_DESTINATIONS):
- always, unless KEYSTORE_HOOK_ALLOW_LINK_LOCAL: link-local and cloud-metadata addresses
  (169.254.0.0/16, fe80::/10, fd00:ec2::254, 100.100.100.200);
- `private`: loopback too (127.0.0.0/8, 0.0.0.0/8, ::1, ::);
- `public`: every address that is not globally routable (the IANA special-purpose
  registries), link-local included whatever KEYSTORE_HOOK_ALLOW_LINK_LOCAL says.
An IPv6 address that embeds an IPv4 address (IPv4-mapped, -compatible, SIIT, NAT64, 6to4,
Teredo) is refused when the IPv4 address is.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Optional, Union
from urllib.parse import urlsplit

Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
MAX_URL = 2048
MODES = ("any", "private", "public")
_ip = ipaddress.ip_network

METADATA = tuple(map(_ip, (
    "169.254.0.0/16",  # IPv4 link-local: AWS, GCP, Azure and OpenStack metadata live here
    "100.100.100.200/32",  # Alibaba Cloud's metadata service
    "fe80::/10",  # IPv6 link-local
    "fd00:ec2::254/128",  # AWS's metadata service over IPv6
)))
LOOPBACK = tuple(map(_ip, (
    "127.0.0.0/8",
    "0.0.0.0/8",  # "this host": connecting to 0.0.0.0 reaches the host's own services
    "::1/128",
    "::/128",  # as 0.0.0.0
)))
# Not globally routable (IANA's IPv4 and IPv6 special-purpose address registries, global =
# False, and multicast): written out, not ipaddress.is_global, whose answers differ between
# Python releases.
NOT_PUBLIC = tuple(map(_ip, (
    "10.0.0.0/8", "100.64.0.0/10", "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24",
    "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
    "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
    "fc00::/7", "fec0::/10", "ff00::/8", "100::/64", "2001::/23", "2001:db8::/32",
    "3fff::/20", "5f00::/16", "64:ff9b:1::/48",
))) + METADATA + LOOPBACK
# IPv6 forms that carry an IPv4 address in their last 32 bits.
_EMBEDDING = tuple(map(_ip, (
    "::ffff:0:0/96",  # IPv4-mapped
    "::ffff:0:0:0/96",  # SIIT (RFC 7915's IPv4-translated)
    "::/96",  # IPv4-compatible (deprecated; :: and ::1 land in 0.0.0.0/8, as they should)
    "64:ff9b::/96",  # NAT64's well-known prefix
    "64:ff9b:1::/48",  # NAT64 local use (RFC 8215), with the usual /96 layout
)))
_LABEL = re.compile(r"[a-z0-9_-]{1,63}\Z")  # underscores: container names (my_workflow)
_NUMERIC = re.compile(r"(0x[0-9a-f]*|[0-9]+)\Z")  # a label a resolver reads as a number
_CANONICAL_V4 = re.compile(r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\Z")


class Refused(ValueError):
    """A destination the service will not send to (the message says why, not more; every
    message begins "the destination", which the relay reads as a final failure)."""


@dataclass(frozen=True, slots=True)
class Target:
    """A checked URL's parts: the host as given (lower case), its address when it is an IP
    literal (None: a name to resolve), the port, the request target and the Host header."""

    scheme: str
    host: str
    ip: Optional[Address]
    port: int
    path: str
    host_header: str


def check_url(url: str) -> str:
    """The URL, if it is an absolute http(s) URL whose host is in its plain spelling and
    with no credentials in it; Refused otherwise."""
    parse(url)
    return url


def parse(url: str) -> Target:
    """The URL's parts; Refused for anything but http(s) with a plainly spelled host."""
    if not isinstance(url, str) or not 0 < len(url) <= MAX_URL or not url.isascii() \
            or not url.isprintable() or " " in url:
        raise Refused("the destination URL is 1-2048 printable ASCII characters")
    try:
        parts = urlsplit(url)
    except ValueError:  # an unbalanced [ or ]
        raise Refused("the destination URL is not valid") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise Refused("the destination URL must be http:// or https:// with a host")
    if "@" in parts.netloc:
        raise Refused("the destination URL has no credentials in it: use its headers")
    host, port = _host_and_port(parts.netloc, 443 if parts.scheme == "https" else 80)
    ip = _address(host)
    shown = f"[{ip.compressed}]" if isinstance(ip, ipaddress.IPv6Address) else host
    default = port == (443 if parts.scheme == "https" else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(parts.scheme, host, ip, port, path,
                  shown if default else f"{shown}:{port}")


def _host_and_port(netloc: str, default: int) -> tuple[str, int]:
    if netloc.startswith("["):
        host, _, rest = netloc[1:].partition("]")
        if not _ or (rest and not rest.startswith(":")):
            raise Refused("the destination's host is not valid: an IPv6 address in brackets")
        host, port = "[" + host + "]", rest[1:] if rest else ""
    else:
        host, _, port = netloc.partition(":")
    if ":" in port or not (port == "" or port.isdigit() and 0 < int(port) <= 65535):
        raise Refused("the destination URL's port is not valid (1-65535)")
    return host.lower(), int(port) if port else default


def _address(host: str) -> Optional[Address]:
    """The host's address when it is an IP literal, None for a name; Refused for a host in
    any other spelling."""
    if "%" in host:
        raise Refused("the destination's host must be in its plain spelling: no "
                      "percent-encoding and no zone id (%25...)")
    if host.startswith("["):
        try:
            return ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise Refused("the destination's host is not a valid IPv6 address") from None
    if host.endswith("."):
        raise Refused("the destination's host must be in its plain spelling: no trailing "
                      "dot")
    labels = host.split(".")
    if _NUMERIC.match(labels[-1]):  # what a resolver would read as an IPv4 address
        if len(labels) == 4 and all(_CANONICAL_V4.match(label) for label in labels):
            return ipaddress.IPv4Address(host)
        raise Refused("the destination's host must be in its plain spelling: an IPv4 "
                      "address as four decimal numbers (127.0.0.1, not 2130706433, "
                      "0x7f.1, 0177.0.0.1 or 127.1)")
    if len(host) > 253 or not all(_LABEL.match(label) for label in labels):
        raise Refused("the destination's host is not a valid name (letters, digits, "
                      "hyphens and underscores, labels of 1-63 between dots)")
    return None


def embedded(address: Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (none for an IPv4 address)."""
    if isinstance(address, ipaddress.IPv4Address):
        return []
    found = [ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
             for net in _EMBEDDING if address in net]
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)  # (server, client)
    return found


class Policy:
    """Which addresses the service may connect to (the module's docstring)."""

    def __init__(self, mode: str = "any", allow_link_local: bool = False):
        if mode not in MODES:
            raise ValueError(f"the destinations mode is one of {', '.join(MODES)}")
        self.mode, self.allow_link_local = mode, allow_link_local

    def check(self, address: Address) -> None:
        """Refused when the address, or an IPv4 address it embeds, is refused."""
        for one in (address, *embedded(address)):
            if self.mode == "public" and _within(one, NOT_PUBLIC):
                raise Refused("the destination resolves to an address that is not public "
                              "(KEYSTORE_HOOK_DESTINATIONS=public)")
            if not self.allow_link_local and _within(one, METADATA):
                raise Refused("the destination resolves to a link-local or cloud-metadata "
                              "address")
            if self.mode == "private" and _within(one, LOOPBACK):
                raise Refused("the destination resolves to a loopback address "
                              "(KEYSTORE_HOOK_DESTINATIONS=private)")


def _within(address: Address, networks: tuple) -> bool:
    return any(address in net for net in networks)  # False across IPv4 and IPv6
