"""Where the relay may forward: http(s) URLs, to loopback and private addresses too (workflows
usually run next door), never to link-local or cloud-metadata addresses unless configured
(KEYSTORE_HOOK_ALLOW_LINK_LOCAL): a tenant's operator chooses the URL, and on a shared key
store it must not reach the host's metadata service (169.254.169.254, fd00:ec2::254)."""
from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

REFUSED_NETWORKS = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"),
                    ipaddress.ip_network("fd00:ec2::254/128"))
MAX_URL = 2048


class Refused(ValueError):
    """A destination the gateway will not forward to (the message says why, not more)."""


def check_url(url: str) -> str:
    """The URL, if it is an absolute http(s) URL with a host and no credentials in it."""
    if not isinstance(url, str) or not 0 < len(url) <= MAX_URL or not url.isascii() \
            or not url.isprintable() or " " in url:
        raise Refused("the destination URL is 1-2048 printable ASCII characters")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Refused("the destination URL must be http:// or https:// with a host")
    if parts.username is not None or parts.password is not None:
        raise Refused("no credentials in the destination URL: use its headers")
    try:
        parts.port  # noqa: B018 (raises ValueError for a port out of range)
    except ValueError:
        raise Refused("the destination URL's port is not valid") from None
    return url


def check_address(url: str, allow_link_local: bool) -> None:
    """Refused when the URL's host is, or resolves to, a refused address (checked when the
    source is made and before every forward)."""
    if allow_link_local:
        return
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:  # an address in its standard spelling needs no lookup (the usual 127.0.0.1)
        addresses = [ipaddress.ip_address(host.split("%")[0])]
    except ValueError:  # a name, or another spelling (2130706433, 0x7f.1): ask the resolver
        try:
            infos = socket.getaddrinfo(host, parts.port or 443, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError):
            return  # not resolvable now: the forward itself fails and is retried
        addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
    for address in addresses:
        mapped = getattr(address, "ipv4_mapped", None)
        if any((mapped or address) in net for net in REFUSED_NETWORKS):
            raise Refused("the destination resolves to a link-local or cloud-metadata address")
