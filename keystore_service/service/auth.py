"""Bearer-token authentication with a short in-process cache.

A valid token is remembered for `cache_seconds` (default 5 s), so the claim hot path pays no
database read for it; a revoked token therefore keeps working for at most that long in a
worker that saw it. Unknown tokens are never cached (a typo must not block the real token).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Optional

from keystore_service import errors
from keystore_service.storage.accounts import Accounts, Principal, hash_token

MAX_CACHED = 10_000  # bounds memory if many distinct valid tokens pass through one worker


class Authenticator:
    def __init__(self, accounts: Accounts, cache_seconds: float = 5.0,
                 monotonic: Callable[[], float] = time.monotonic):
        self.accounts = accounts
        self.cache_seconds = cache_seconds
        self._monotonic = monotonic
        self._cache: dict[str, tuple[Principal, float]] = {}
        self._lock = threading.Lock()

    def authenticate(self, header: Optional[str]) -> Principal:
        """The principal of an `Authorization: Bearer <token>` header; 401 otherwise."""
        scheme, _, token = (header or "").strip().partition(" ")
        if scheme.lower() != "bearer":  # the scheme is case-insensitive (RFC 9110, 11.1)
            raise errors.Unauthorized()
        token = token.strip()
        if not token or len(token) > 256:
            raise errors.Unauthorized()
        key = hash_token(token)  # the cache never holds the token itself
        now = self._monotonic()
        hit = self._cache.get(key)
        if hit is not None and hit[1] > now:
            return hit[0]
        principal = self.accounts.principal(token)
        if principal is None:
            raise errors.Unauthorized()
        if self.cache_seconds > 0:
            with self._lock:
                if len(self._cache) >= MAX_CACHED:
                    self._cache.clear()
                self._cache[key] = (principal, now + self.cache_seconds)
        return principal


def require_operator(principal: Principal) -> None:
    if not principal.is_operator:
        raise errors.Forbidden("this needs an operator token")
