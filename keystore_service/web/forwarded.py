"""The client's address behind a reverse proxy, for the access log.

A proxy in front (nginx, docs/deployment.md) connects from its own address and passes the
client's in `X-Forwarded-For`. That header is believed only from a trusted peer: the same
list gunicorn uses for `X-Forwarded-Proto` (`KEYSTORE_FORWARDED_ALLOW_IPS`, loopback by
default), so one setting says which proxies are trusted for both. Only the standard library.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Optional, Union

Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]


def parse_trusted(spec: str) -> Callable[[Address], bool]:
    """`"127.0.0.1,::1,10.0.0.0/8"` or `"*"` -> a predicate. Raises ValueError on a bad item."""
    items = [item.strip() for item in spec.split(",") if item.strip()]
    if "*" in items:
        return lambda _ip: True
    networks: list[Network] = [ipaddress.ip_network(item, strict=False) for item in items]
    return lambda ip: any(ip in net for net in networks if net.version == ip.version)


def _ip(text: str) -> Optional[Address]:
    """An address as text -> the address; None for anything else (a port, a name, a zone id,
    non-ASCII digits: `ipaddress` parses ASCII digits only)."""
    try:
        ip = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id is not None:
            return None
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
    return ip


def client_address(peer: Optional[str], forwarded_for: Optional[str],
                   trusted: Callable[[Address], bool]) -> str:
    """The client as the log should name it: the peer's address, or, when the peer is a
    trusted proxy, the nearest address in `forwarded_for` (read from the right) that is not
    itself a trusted proxy. Never anything but a normalised IP address, or "-"."""
    peer_ip = _ip(peer or "")
    if peer_ip is None:
        return "-"
    address = peer_ip
    if forwarded_for and trusted(peer_ip):
        for entry in reversed(forwarded_for.split(",")):
            ip = _ip(entry)
            if ip is None:
                break  # garbage: keep the last address a trusted hop vouched for
            address = ip
            if not trusted(ip):
                break
    return str(address)
