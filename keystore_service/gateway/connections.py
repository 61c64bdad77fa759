"""Connections, as operators manage them (issue 28, "Outbound"): the named downstream APIs
that sends go to and checks ask. A base URL passes the destination rules where it is given
(and again where each request connects); the headers (an API's credentials) are sealed with
the gateway's Sealer, never returned or logged: answers show their names only. A scope's
settlement (PUT /v1/scopes/<scope>/settlement) names one of the tenant's connections.

The rules a send's path follows (`path_problem`) live here too: a check's path follows them,
and so does POST /v1/send's (gateway/sending.py)."""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Optional

from keystore_service import errors
from keystore_service.domain import pointers
from keystore_service.domain.names import NAME
from keystore_service.domain.records import HOOK_SCOPE_PREFIX, Micros
from keystore_service.domain.sends import OnAbsent
from keystore_service.gateway import destinations
from keystore_service.gateway.outbound import Outbound
from keystore_service.service.sealing import Sealer, SourceBroken
from keystore_service.storage.connections import Connection, ConnectionStore
from keystore_service.storage.settlements import ScopeSettlement, ScopeSettlementStore

# The patterns are /openapi.json's too (web/api/connection_schemas.py): one rule, two readers.
HEADER_NAME_PATTERN = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$"  # an RFC 9110 token
HEADER_VALUE_PATTERN = r"^[\u0020-\u007e\u00a0-\u00ff]*$"  # no CR, LF or other control
# A request's path: printable ASCII but space, # and \ (the path rules of path_problem)...
PATH_PATTERN = r'^/[!"$-\[\]-~]*$'
# ...and a check's, whose only braces are its placeholders
CHECK_PATH_PATTERN = r'^/(?:[!"$-\[\]-z|~]|\{(?:key|scope|reference)\})*$'
# ...but none of: an empty segment (//), an encoded / or \, a . or .. segment (plain or
# encoded), in the part before the query
PATH_REFUSED = r"^[^?]*(?://|%2[fF]|%5[cC]|/(?:\.|%2[eE]){1,2}(?:/|\?|$))"
POINTER_PATTERN = r"^(?:/(?:[^~/\u0000-\u001f\u007f-\u009f]|~[01])*)*$"  # RFC 6901
SCOPE = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")  # web/api/field_types.Scope
HEADER_NAME = re.compile(HEADER_NAME_PATTERN)
HEADER_VALUE = re.compile(HEADER_VALUE_PATTERN)
_PATH, _CHECK_PATH = re.compile(PATH_PATTERN), re.compile(CHECK_PATH_PATTERN)
_PATH_REFUSED, _POINTER = re.compile(PATH_REFUSED), re.compile(POINTER_PATTERN)
MAX_HEADER_VALUE = 4096
MAX_HEADERS = 32
# The request's framing and target are the gateway's, and the idempotency header's value is
# the send's `<scope>:<key>`: none may be set among a connection's headers.
FRAMING = frozenset({"host", "content-length", "transfer-encoding", "connection"})
MAX_PATH = 2048
MAX_POINTER = 256
PLACEHOLDERS = ("{key}", "{scope}", "{reference}")
DEFAULTS = {"headers": {}, "idempotency_header": None, "timeout_seconds": 10,
            "retry_window_seconds": 86_400, "max_in_flight": 4, "rate": None, "check": None}
NULLABLE = ("idempotency_header", "rate", "check")
PLAIN = ("base_url", "idempotency_header", "timeout_seconds", "retry_window_seconds",
         "max_in_flight", "rate", "check")


BROKEN = ("no key of this key store's KEYSTORE_SECRET_KEY opens this connection's headers "
          "(sealed with a key since removed): put that key back in KEYSTORE_SECRET_KEY (after "
          "the first), or give the connection its headers again (PATCH)")


class ConnectionBroken(SourceBroken):
    """503 unavailable (Retry-After 60): no configured key opens a connection's headers. A
    request is never made without them (an API would refuse it for good, or worse)."""


def path_problem(path: Any) -> Optional[str]:
    """Why `path` is not a path a request may take (None when it may): it begins with "/",
    is printable ASCII without spaces, `\\` or `#`, at most 2048 characters, and its path
    part has no empty segment (`//`: a host), no `.` or `..` segment, plain or
    percent-encoded, and no encoded `/` or `\\`. A query ("?...") is the request's own."""
    if not isinstance(path, str) or not path.startswith("/"):
        return "the path begins with /"
    if len(path) > MAX_PATH:
        return f"the path is at most {MAX_PATH} characters"
    if not _PATH.fullmatch(path):
        return "the path is printable ASCII without spaces, \\ or # (percent-encode them)"
    return _segments_problem(path)


def _segments_problem(path: str) -> Optional[str]:
    if _PATH_REFUSED.search(path):
        return "the path has no empty segment (// would name a host), no . or .. segment " \
               "and no percent-encoded / or \\ (before its query)"
    return None


def check_path_problem(template: Any) -> Optional[str]:
    """A check's path: a request's path (path_problem) whose only braces are the
    placeholders {key}, {scope} and {reference}."""
    if not isinstance(template, str) or not template.startswith("/"):
        return "the path begins with /"
    if len(template) > MAX_PATH:
        return f"the path is at most {MAX_PATH} characters"
    if not _CHECK_PATH.fullmatch(template):
        return "the check's path is printable ASCII without spaces, \\ or #, and its only " \
               "braces are its placeholders {key}, {scope} and {reference}"
    return _segments_problem(template)


def pointer_problem(pointer: Any) -> Optional[str]:
    if not isinstance(pointer, str) or len(pointer) > MAX_POINTER or \
            not _POINTER.fullmatch(pointer) or not pointers.valid(pointer):
        return f"a JSON pointer (RFC 6901: \"\" or /a/b, ~0 and ~1 escapes, no control " \
               f"characters), at most {MAX_POINTER} characters"
    return None


def header_problem(headers: dict, idempotency_header: Optional[str]) -> Optional[str]:
    """Why these headers cannot be a connection's (None when they can)."""
    if len(headers) > MAX_HEADERS:
        return f"at most {MAX_HEADERS} headers"
    seen: set[str] = set()
    for name, value in headers.items():
        if not isinstance(name, str) or not HEADER_NAME.fullmatch(name):
            return "a header name is a token of 1-64 characters (letters, digits, !#$%&'*+.^_`|~-)"
        if not isinstance(value, str) or len(value) > MAX_HEADER_VALUE or \
                not HEADER_VALUE.fullmatch(value):
            return f"the value of {name} is at most 4096 printable characters, no CR, LF or " \
                   "other control character"
        low = name.lower()
        if low in seen:
            return f"{name} is given twice (header names are compared without case)"
        seen.add(low)
        if low in FRAMING:
            return f"{name} is the gateway's to set, not a connection's"
        if idempotency_header is not None and low == idempotency_header.lower():
            return f"{name} is the idempotency_header: its value is each send's <scope>:<key>"
    return None


def _refuse(field: str, message: str) -> None:
    raise errors.InvalidRequest(f"{field}: {message}", details={"field": field})


def _plain(value: Any) -> Any:
    """A validated model (or a dict of them) as the plain JSON it is stored as."""
    if hasattr(value, "plain"):
        return value.plain()
    if hasattr(value, "model_dump"):
        return value.model_dump(exclude_none=True)
    return value


def _given(body: Any, create: bool) -> dict:
    """The fields the body gives (a dict, or a validated model: create takes its defaults
    too, PATCH only what was set)."""
    if isinstance(body, dict):
        given = dict(body)
    else:
        names = type(body).model_fields if create else body.model_fields_set
        given = {n: getattr(body, n) for n in names}
    if create:
        given = {**DEFAULTS, **given}
    return {k: _plain(v) for k, v in given.items()}


class Connections:
    def __init__(self, store: ConnectionStore, settlements: ScopeSettlementStore,
                 sealer: Sealer, outbound: Outbound, clock: Callable[[], Micros]):
        self.store, self.settlements = store, settlements
        self.sealer, self.outbound, self.clock = sealer, outbound, clock

    # --- connections --------------------------------------------------------------------

    def create(self, tenant_id: int, body: Any) -> Connection:
        """A new connection from a validated ConnectionCreate (or its dict); InvalidRequest
        for what the schema cannot know (a refused base URL, a header it may not set)."""
        given = _given(body, create=True)
        if not isinstance(given.get("name"), str) or not NAME.fullmatch(given["name"]):
            _refuse("name", "1-64 of a-z 0-9 _ -")
        headers = given["headers"] or {}
        self._check_url(given["base_url"])
        self._check_headers(headers, given["idempotency_header"])
        values = {f: given[f] for f in PLAIN} | {
            "name": given["name"], "sealed": self.sealer.seal(headers),
            "header_names": list(headers)}
        return self.store.create(tenant_id, values, self.clock())

    def get(self, tenant_id: int, name: str) -> Connection:
        connection = self.store.get(tenant_id, name) if NAME.fullmatch(name) else None
        if connection is None:
            raise errors.NotFound(f"no connection named {name!r}")
        return connection

    def list(self, tenant_id: int) -> list[Connection]:
        return self.store.list(tenant_id)

    def change(self, tenant_id: int, name: str, body: Any) -> Connection:
        """PATCH: what is given changes (all or nothing); `headers` given replace them all.
        The name does not change."""
        connection = self.get(tenant_id, name)
        given = _given(body, create=False)
        if "name" in given:
            _refuse("name", "a connection's name does not change")
        # null clears what may be none (the idempotency header, rate, check), else is no change
        given = {k: v for k, v in given.items() if v is not None or k in NULLABLE}
        changes = {f: given[f] for f in PLAIN if f in given}
        if "base_url" in changes:
            self._check_url(changes["base_url"])
        idem = changes.get("idempotency_header", connection.idempotency_header)
        if "headers" in given:
            headers = given["headers"] or {}
            self._check_headers(headers, idem)
            changes |= {"sealed": self.sealer.seal(headers), "header_names": list(headers)}
        elif "idempotency_header" in changes:  # the kept names are enough to compare
            self._check_headers({n: "" for n in connection.header_names}, idem)
        if not changes:
            return connection
        changed = self.store.update(tenant_id, name, changes, self.clock())
        if changed is None:  # deleted meanwhile
            raise errors.NotFound(f"no connection named {name!r}")
        return changed

    def delete(self, tenant_id: int, name: str) -> Connection:
        """Gone, with the scopes' settlements that name it; 409 in_progress while it has
        sends queued, being sent or being checked."""
        connection = self.get(tenant_id, name)
        if not self.store.delete(tenant_id, name):
            raise errors.NotFound(f"no connection named {name!r}")
        return connection

    def headers(self, connection: Connection) -> dict[str, str]:
        """Its headers, unsealed, for a request (never to be logged or shown);
        ConnectionBroken when no configured key opens them (see `opens`)."""
        try:
            opened = self.sealer.open(connection.sealed)
        except ValueError:
            raise ConnectionBroken(BROKEN, details={"reason": "connection_broken",
                                                    "setting": "KEYSTORE_SECRET_KEY"}) from None
        return dict(opened)

    def opens(self, connection: Connection) -> bool:
        """Whether a configured key opens its headers (a request can be made)."""
        try:
            self.sealer.open(connection.sealed)
        except ValueError:
            return False
        return True

    def shown(self, connection: Connection) -> dict:
        """The API's form: everything but the headers' values."""
        return {"name": connection.name, "base_url": connection.base_url,
                "headers": list(connection.header_names),
                "idempotency_header": connection.idempotency_header,
                "timeout_seconds": connection.timeout_seconds,
                "retry_window_seconds": connection.retry_window_seconds,
                "max_in_flight": connection.max_in_flight, "rate": connection.rate,
                "check": connection.check, "created_at": connection.created_at,
                "updated_at": connection.updated_at}

    def _check_url(self, url: Any) -> None:
        if not isinstance(url, str):
            _refuse("base_url", "an http:// or https:// URL")
        try:
            self.outbound.check(url)
        except destinations.Refused as exc:
            _refuse("base_url", str(exc))
        if "#" in url:
            _refuse("base_url", "the base URL has no fragment (#...)")

    def _check_headers(self, headers: Any, idempotency_header: Optional[str]) -> None:
        if idempotency_header is not None:
            if not isinstance(idempotency_header, str) or \
                    not HEADER_NAME.fullmatch(idempotency_header):
                _refuse("idempotency_header", "a header name (a token of 1-64 characters)")
            if idempotency_header.lower() in FRAMING:
                _refuse("idempotency_header", f"{idempotency_header} is the gateway's to set")
        if not isinstance(headers, dict):
            _refuse("headers", "an object of header names and values")
        problem = header_problem(headers, idempotency_header)
        if problem:
            _refuse("headers", problem)

    # --- a scope's settlement -----------------------------------------------------------

    def settlement(self, tenant_id: int, scope: str) -> tuple[ScopeSettlement, Connection]:
        found = self.settlements.get(tenant_id, scope) if _scope_ok(scope) else None
        connection = self.store.by_id(found.connection_id, tenant_id=tenant_id) \
            if found is not None else None
        if found is None or connection is None:
            raise errors.NotFound(f"the scope {scope[:128]!r} has no settlement")
        return found, connection

    def settle_scope(self, tenant_id: int, scope: str, connection_name: str, check: Any,
                     on_absent: str) -> tuple[ScopeSettlement, Connection]:
        """The scope's settlement, made or replaced. A webhook source's scope ("hook:...")
        is settled by its deliveries, never by a check."""
        if not _scope_ok(scope):
            _refuse("scope", "a scope is 1-128 of A-Z a-z 0-9 _ . : -")
        if scope.startswith(HOOK_SCOPE_PREFIX):
            _refuse("scope", f"a webhook source's scope ({HOOK_SCOPE_PREFIX}...) is settled "
                             "by its deliveries, not by a check")
        if on_absent not in tuple(OnAbsent):
            _refuse("on_absent", "release or review")
        connection = self.store.get(tenant_id, connection_name) \
            if isinstance(connection_name, str) and NAME.fullmatch(connection_name) else None
        if connection is None:
            _refuse("connection", f"the tenant has no connection named {connection_name!r}")
        put = self.settlements.put(tenant_id, scope, connection.id, _plain(check),
                                   str(on_absent), self.clock())
        return put, connection

    def unsettle_scope(self, tenant_id: int, scope: str) -> tuple[ScopeSettlement, Connection]:
        found = self.settlement(tenant_id, scope)
        self.settlements.delete(tenant_id, scope)
        return found


def _scope_ok(scope: Any) -> bool:
    return isinstance(scope, str) and SCOPE.fullmatch(scope) is not None
