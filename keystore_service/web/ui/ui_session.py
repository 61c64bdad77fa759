"""The operators' page session: a signed cookie (not encrypted: it holds no secret but the
CSRF token, which the page shows in its forms anyway), idle and absolute time limits, and
the per-session CSRF token that every POST must carry.

The cookie holds the tenant, the token's *name* (never the token or its hash) and the id of
the session's row in the database (storage/sessions.py's SignIns): a signed-in cookie counts
only while that row exists, so signing out ends it everywhere. It is HttpOnly,
SameSite=Strict, limited to /ui, and Secure when the request came over https (or always, by
setting). It is signed with a key kept in the database, so every worker of every instance
accepts it.
"""
from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Optional

from itsdangerous import BadSignature, URLSafeSerializer

from keystore_service.domain.records import SECOND, Micros

COOKIE = "keystore_ui"
COOKIE_PATH = "/ui"
CSRF_FIELD = "csrf_token"
# A session ends after a working day however active it is: a cookie copied off a machine
# stops working by the next morning even if someone keeps it busy.
MAX_SESSION_SECONDS = 12 * 3600


@dataclass(frozen=True, slots=True)
class Session:
    csrf: str
    tenant_id: Optional[int] = None
    tenant: Optional[str] = None
    token_name: Optional[str] = None
    signed_in_at: Optional[Micros] = None
    seen: Optional[Micros] = None
    sid: Optional[str] = None  # the session's id (its row: storage/sessions.py); random, 256 bits

    @property
    def signed_in(self) -> bool:
        return self.tenant_id is not None

    def signed_out(self) -> Session:
        """The same browser, signed out (its CSRF token stays: a form left open past the
        idle time is answered with the sign-in page, not with a CSRF refusal)."""
        return Session(csrf=self.csrf)


@dataclass(frozen=True, slots=True)
class Loaded:
    session: Session
    ended: Optional[str] = None  # "idle" or "limit" when a signed-in session just ran out


def new_csrf() -> str:
    return secrets.token_urlsafe(32)


class Sessions:
    """Reads and writes the session cookie; `key` gives the signing key (read lazily, so
    the database is asked only when a page is first used)."""

    def __init__(self, key: Callable[[], str], idle_seconds: float, clock: Callable[[], Micros]):
        self._key = key
        self._serializer: Optional[URLSafeSerializer] = None
        self.idle = int(idle_seconds * SECOND)
        self.clock = clock

    def _signer(self) -> URLSafeSerializer:
        if self._serializer is None:
            self._serializer = URLSafeSerializer(self._key(), salt="keystore-ui-session")
        return self._serializer

    def load(self, cookie: Optional[str]) -> Loaded:
        """The session in the cookie; a fresh signed-out one if there is none, it is not
        ours, or it ran out (then `ended` says why)."""
        if not cookie:
            return Loaded(Session(csrf=new_csrf()))
        try:
            data = self._signer().loads(cookie)
            session = Session(**data)
        except (BadSignature, TypeError, ValueError):
            return Loaded(Session(csrf=new_csrf()))
        if not session.signed_in:
            return Loaded(session)
        now = self.clock()
        if now - (session.seen or 0) > self.idle:
            return Loaded(session.signed_out(), "idle")
        if now - (session.signed_in_at or 0) > MAX_SESSION_SECONDS * SECOND:
            return Loaded(session.signed_out(), "limit")
        return Loaded(replace(session, seen=now))

    def sign_in(self, tenant_id: int, tenant: str, token_name: str) -> Session:
        """A new session, with a new id and a new CSRF token (nothing from before signing in
        carries on). The caller records its id (storage/sessions.SignIns.start)."""
        now = self.clock()
        return Session(csrf=new_csrf(), tenant_id=tenant_id, tenant=tenant,
                       token_name=token_name, signed_in_at=now, seen=now,
                       sid=secrets.token_urlsafe(32))

    def dump(self, session: Session) -> str:
        return self._signer().dumps(asdict(session))


def csrf_ok(session: Session, given: Optional[str]) -> bool:
    """The form's token is this session's (compared in constant time)."""
    return bool(given) and hmac.compare_digest(session.csrf.encode(), given.encode())
