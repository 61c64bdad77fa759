"""The one client every outbound request of the service goes through (forwards today;
connections and alert channels next): it parses the URL (destinations.parse: the host in
its plain spelling), resolves a name ONCE, checks every address against the policy and
connects to exactly an address it checked, the Host header and TLS (SNI and the
certificate's name) still those of the URL's host; so a name that resolves elsewhere the
second time (DNS rebinding) cannot slip between the check and the connection. The whole
request, from the lookup to the answer's last byte kept, ends by one deadline (deadlines.py).

An IP literal needs no lookup; a name is looked up in a small pool of threads, so that a
resolver that hangs costs the request its deadline and no more, and its answer is used
again for LOOKUP_KEEP_SECONDS (checked again at each use, and connected to as checked).
"""
from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as LookupTimeout
from dataclasses import dataclass
from typing import Any, Optional

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NewConnectionError,
    ProtocolError,
    SSLError,
)
from urllib3.exceptions import TimeoutError as Timeout

from keystore_service.gateway import destinations
from keystore_service.gateway.deadlines import Bound, Deadlines
from keystore_service.gateway.destinations import Policy, Refused, Target

Resolver = Callable[[str, int], list[str]]  # (name, port) -> addresses, in the order to try
CONNECT_SECONDS = 5  # per address: a host that drops SYNs must not take the whole deadline
CHECK_LOOKUP_SECONDS = 5  # a source's create or PATCH waits this long for its name's lookup
LOOKUP_THREADS = 8  # lookups at once; more wait their turn (within their deadline)
MAX_POOLS = 64  # (address, name) pairs kept with their connections, the least used dropped
POOL_SIZE = 256  # kept-alive connections per pool: the relay's highest concurrency
PARSED_URLS = 1_000  # URLs kept parsed (and IP literals checked), as Forwarding's routes
# A name's answer is used again for this long: a lookup through the pool cost ~0.1 ms of a
# forward's ~0.25 ms of CPU (localhost), at every forward of a busy source. Each use checks
# the addresses again and connects to them, so this changes nothing to what may be reached.
LOOKUP_KEEP_SECONDS = 2.0


def system_resolver(name: str, port: int) -> list[str]:
    """The addresses getaddrinfo gives for a TCP connection, once each, in its order."""
    seen: dict[str, None] = {}
    for info in socket.getaddrinfo(name, port, type=socket.SOCK_STREAM):
        seen.setdefault(str(info[4][0]), None)
    return list(seen)


@dataclass(frozen=True, slots=True)
class Reply:
    """What a request came to: an answer (status, headers, up to `keep` bytes of it) or an
    error: "timeout", "no connection", or a refusal that begins "the destination"."""

    status: Optional[int]
    headers: Any  # the answer's headers (a case-insensitive mapping), {} without an answer
    body: bytes
    error: Optional[str]
    sent: bool = True  # False: refused or not connected before any byte of the request left


class Outbound:
    def __init__(self, policy: Policy, resolver: Resolver = system_resolver,
                 ca_certs: Optional[str] = None,
                 lookup_keep_seconds: float = LOOKUP_KEEP_SECONDS):
        self.policy, self.resolver, self.ca_certs = policy, resolver, ca_certs
        self.lookup_keep_seconds = lookup_keep_seconds
        self._answers: dict[tuple[str, int], tuple[float, list[str]]] = {}
        self.deadlines = Deadlines()
        self._lookups = ThreadPoolExecutor(LOOKUP_THREADS, thread_name_prefix="keystore-dns")
        self._pools: OrderedDict[tuple, urllib3.HTTPConnectionPool] = OrderedDict()
        self._lock = threading.Lock()
        self._parsed: dict[str, Any] = {}  # a URL: its Target, or why it is refused

    def check(self, url: str) -> None:
        """Refused for a URL the service will not send to (at a source's create and PATCH).
        A name that does not resolve now passes: its requests fail until it does, and each
        is checked again where it connects."""
        target = destinations.parse(url)
        try:
            addresses = [target.ip.compressed] if target.ip is not None else \
                self._lookups.submit(self.resolver, target.host, target.port).result(
                    CHECK_LOOKUP_SECONDS)  # a fresh answer, not one kept for forwards
        except (OSError, UnicodeError, LookupTimeout):
            return
        for address in addresses:
            self.policy.check(_ip(address))

    def request(self, method: str, url: str, body: bytes, headers: dict[str, str],
                timeout: float, keep: int) -> Reply:
        """One request, ended by `timeout` seconds from now whatever the destination does;
        no redirects followed, no proxy, up to `keep` bytes of the answer read."""
        deadline = time.monotonic() + timeout
        try:
            target = self._parse(url)
            addresses = self._addresses(target, deadline)
            if target.ip is None:  # an IP literal was checked once, in _parse
                for address in addresses:
                    self.policy.check(_ip(address))
        except Refused as exc:
            return Reply(None, {}, b"", str(exc), sent=False)
        except LookupTimeout:
            return Reply(None, {}, b"", "timeout", sent=False)
        except (OSError, UnicodeError):  # the name does not resolve
            return Reply(None, {}, b"", "no connection", sent=False)
        for n, address in enumerate(addresses):
            with self.deadlines.bound(deadline) as bound:
                reply = self._send(self._pool(target, address), target, method, body,
                                   headers, bound, keep)
            # the next address only when this one took nothing: never a request twice
            if reply.sent or n == len(addresses) - 1 or bound.left() <= 0:
                return reply
        raise AssertionError("a target has at least one address")  # pragma: no cover

    def _parse(self, url: str) -> Target:
        """destinations.parse(url), and the policy's check of an IP literal, once per URL:
        ~18 us of a forward's ~250 us of CPU (docs/benchmarks.md), the same at every forward
        of a source. A refusal is kept too: a refused URL is refused again at no cost."""
        found = self._parsed.get(url)
        if found is None:
            try:
                found = destinations.parse(url)
                if found.ip is not None:
                    self.policy.check(found.ip)
            except Refused as exc:
                found = str(exc)
            if len(self._parsed) >= PARSED_URLS:
                self._parsed.clear()
            self._parsed[url] = found
        if isinstance(found, str):
            raise Refused(found)
        return found

    def _addresses(self, target: Target, deadline: float) -> list[str]:
        if target.ip is not None:  # an IP literal: no lookup
            return [target.ip.compressed]
        key, now = (target.host, target.port), time.monotonic()
        kept = self._answers.get(key)
        if kept is not None and kept[0] > now:
            return kept[1]
        found = self._lookups.submit(self.resolver, target.host, target.port).result(
            max(0.0, deadline - now))
        if not found:
            raise OSError("no address")
        if self.lookup_keep_seconds > 0:
            if len(self._answers) >= PARSED_URLS:
                self._answers.clear()
            self._answers[key] = (now + self.lookup_keep_seconds, found)
        return found

    def _send(self, pool: urllib3.HTTPConnectionPool, target: Target, method: str,
              body: bytes, headers: dict[str, str], bound: Bound, keep: int) -> Reply:
        left = bound.left()
        if left <= 0:
            return Reply(None, {}, b"", "timeout", sent=False)
        sent = {k: v for k, v in headers.items() if k.lower() != "host"}
        sent["Host"] = target.host_header  # the URL's host, whatever a caller put in headers
        try:
            resp = pool.urlopen(
                method, target.path, body=body, headers=sent,
                timeout=urllib3.Timeout(connect=min(CONNECT_SECONDS, left), read=left),
                redirect=False, retries=False, preload_content=False, assert_same_host=False)
            try:
                raw = _read(resp, keep)
            finally:
                if bound.cut or not resp.closed:  # cut, or more answer than is kept
                    resp.close()
                resp.release_conn()
            if bound.cut:
                return Reply(None, {}, b"", "timeout")
            return Reply(resp.status, resp.headers, raw, None)
        except NewConnectionError:  # before Timeout: urllib3 makes it one (compatibility)
            return Reply(None, {}, b"", "timeout" if bound.left() <= 0 else "no connection",
                         sent=False)
        except ConnectTimeoutError:  # nothing was sent either
            return Reply(None, {}, b"", "timeout", sent=False)
        except Timeout:
            return Reply(None, {}, b"", "timeout")
        except (ProtocolError, SSLError, HTTPError, OSError, ValueError) as exc:
            if bound.cut:
                return Reply(None, {}, b"", "timeout")
            if isinstance(exc, (ProtocolError, SSLError)):
                return Reply(None, {}, b"", "no connection")
            return Reply(None, {}, b"", type(exc).__name__)

    def _pool(self, target: Target, address: str) -> urllib3.HTTPConnectionPool:
        key = (target.scheme, address, target.port, target.host)
        with self._lock:  # the relay's threads share the pools
            pool = self._pools.get(key)
            if pool is not None:
                self._pools.move_to_end(key)
                return pool
            pool = self._new_pool(target, address)
            self._pools[key] = pool
            if len(self._pools) > MAX_POOLS:  # in-flight requests finish; then it closes
                self._pools.popitem(last=False)[1].close()
            return pool

    def _new_pool(self, target: Target, address: str) -> urllib3.HTTPConnectionPool:
        common = dict(port=target.port, maxsize=POOL_SIZE, block=False, retries=False,
                      deadlines=self.deadlines)
        if target.scheme == "https":
            name = None if target.ip is not None else target.host
            pool = urllib3.HTTPSConnectionPool(
                address, **common, cert_reqs="CERT_REQUIRED", ca_certs=self.ca_certs,
                server_hostname=name, assert_hostname=name)
            pool.ConnectionCls = _WatchedHTTPS
        else:
            pool = urllib3.HTTPConnectionPool(address, **common)
            pool.ConnectionCls = _WatchedHTTP
        return pool


def _read(resp: Any, keep: int) -> bytes:
    """Up to `keep` bytes of the answer, as it comes (read1: one receive at a time)."""
    raw = b""
    while len(raw) < keep:
        part = resp.read1(keep - len(raw), decode_content=True)
        if not part:
            break
        raw += part
    return raw


def _ip(address: str) -> destinations.Address:
    """A resolver's answer as an address (a zone id, which it may add, set aside)."""
    return ipaddress.ip_address(address.split("%", 1)[0])


class _Watched:
    """A connection whose socket the request's deadline watches: a new one as soon as it is
    connected (before TLS, so a trickled handshake is cut too), a kept-alive one when the
    next request begins on it."""

    def __init__(self, *args: Any, deadlines: Deadlines, **kwargs: Any):
        self._deadlines = deadlines
        self._watched_for: Optional[Bound] = None
        super().__init__(*args, **kwargs)

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()  # type: ignore[misc]
        try:
            self._watched_for = self._deadlines.watch(sock)
        except OSError:  # no descriptor left for the watch: no connection, none leaked
            sock.close()
            raise
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        sock = getattr(self, "sock", None)
        if sock is not None and self._watched_for is not self._deadlines.current():
            self._watched_for = self._deadlines.watch(sock)  # kept alive from before
        return super().request(*args, **kwargs)  # type: ignore[misc]


class _WatchedHTTP(_Watched, HTTPConnection):
    pass


class _WatchedHTTPS(_Watched, HTTPSConnection):
    pass
