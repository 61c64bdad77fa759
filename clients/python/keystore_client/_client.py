"""`KeyStore`: the contract's calls, each returning a typed result or raising one error class.

Retries happen here and only where they are safe: a connection that was never made, a 429 or
503 (the service says nothing was written), and a lost answer on the calls the contract makes
safe to repeat (a complete with the same token and result, a release, an extend, a lookup, an
expire). A claim whose answer was lost is never repeated: it may have been applied, and a
repeat would only see its own lease as `in_progress`. `claim(wait=...)` waits out another
attempt's live lease by polling the record, then claims again.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, Optional, Union

import requests

from ._exceptions import (
    ConnectError,
    Expired,
    InProgress,
    NotFound,
    OutcomeUnknown,
    RateLimited,
    Unavailable,
)
from ._models import Claimed, Record, Result
from ._retry import RetryPolicy
from ._transport import error_from, json_body, send

__version__ = "0.1.0"
DEFAULT_TIMEOUT = 10.0  # seconds per HTTP request; a lookup with `wait` adds the wait
FIRST_POLL_INTERVAL = 0.05  # seconds: the first pause while another attempt holds the lease
MAX_POLL_INTERVAL = 1.0  # seconds: pauses grow to this, so a finished record is seen within 1 s
ResultLike = Union[Result, dict, None]


class KeyStore:
    """A client of one key store, acting with one tenant's token. Safe to share between
    threads: without an injected `session`, each thread gets its own `requests.Session`."""

    def __init__(self, url: str, token: str, *, session: Optional[requests.Session] = None,
                 timeout: float = DEFAULT_TIMEOUT, retry: Optional[RetryPolicy] = None):
        if not url.startswith(("http://", "https://")):
            raise ValueError("the key store URL must start with http:// or https://")
        if not token:
            raise ValueError("a bearer token is required")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self._token = token
        self._session = session
        self._local = threading.local()
        self._owned: list[requests.Session] = []
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, **kwargs: Any) -> KeyStore:
        """From `KEYSTORE_URL` and `KEYSTORE_TOKEN`; KeyError names the missing one."""
        return cls(os.environ["KEYSTORE_URL"], os.environ["KEYSTORE_TOKEN"], **kwargs)

    def __repr__(self) -> str:  # never the token
        return f"KeyStore({self.url!r})"

    def __enter__(self) -> KeyStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the sessions this client opened (an injected session is the caller's)."""
        with self._lock:
            owned, self._owned = self._owned, []
        for s in owned:
            s.close()

    # --- the contract's calls -------------------------------------------------------------

    def claim(self, scope: str, key: str, *, payload: Any = None,
              fingerprint: Optional[str] = None, ttl_seconds: Optional[int] = None,
              lease_seconds: Optional[int] = None, on_stale: Optional[str] = None,
              wait: float = 0) -> Claimed:
        """Claim (scope, key) before acting. Returns `acquired` (with the lease token) or
        `replay` (with the stored result). With `wait` > 0, another attempt's live lease is
        waited out for up to `wait` seconds. Raises InProgress (after the wait),
        NeedsReconciliation, FingerprintMismatch, or another KeyStoreError."""
        body = _present(scope=scope, key=key, payload=payload, fingerprint=fingerprint,
                        ttl_seconds=ttl_seconds, lease_seconds=lease_seconds, on_stale=on_stale)
        deadline = self.retry.clock() + wait
        while True:
            try:
                return Claimed.from_json(self._call("POST", "/v1/claim", body, repeatable=False))
            except InProgress as exc:
                if not self._wait_for_change(scope, key, deadline, exc.retry_after):
                    raise

    def complete(self, scope: str, key: str, lease_token: str, *, state: str = "succeeded",
                 result: ResultLike = None) -> Record:
        """Finish the attempt as `succeeded` or `failed` with its result. Repeating it with
        the same token, state and result is safe, so a lost answer is retried."""
        body = _present(scope=scope, key=key, lease_token=lease_token, state=state,
                        result=_result_json(result))
        return Record.from_json(self._call("POST", "/v1/complete", body)["record"])

    def release(self, scope: str, key: str, lease_token: str, *,
                reason: Optional[str] = None) -> Record:
        """Give the attempt back (a transient failure): the next claim acquires it again."""
        body = _present(scope=scope, key=key, lease_token=lease_token, reason=reason)
        return Record.from_json(self._call("POST", "/v1/release", body)["record"])

    def extend(self, scope: str, key: str, lease_token: str, lease_seconds: int, *,
               checkpoint: Optional[str] = None, resource_id: Optional[str] = None) -> Record:
        """Move the lease to now + `lease_seconds`; optionally record how far the work got."""
        body = _present(scope=scope, key=key, lease_token=lease_token,
                        lease_seconds=lease_seconds, checkpoint=checkpoint,
                        resource_id=resource_id)
        return Record.from_json(self._call("POST", "/v1/extend", body)["record"])

    def lookup(self, scope: str, key: str, *, wait: Optional[int] = None) -> Record:
        """The record; with `wait` (1..30 s), waits while it is in progress. Raises NotFound
        or Expired."""
        params = _present(scope=scope, key=key, wait=wait)
        timeout = self.timeout + (wait or 0)
        return Record.from_json(
            self._call("GET", "/v1/keys", params=params, timeout=timeout)["record"])

    def expire(self, scope: str, key: str) -> Record:
        """End the record's retention window now (operator token)."""
        body = {"scope": scope, "key": key}
        return Record.from_json(self._call("POST", "/v1/expire", body)["record"])

    # --- the exactly-once helper ------------------------------------------------------------

    def once(self, scope: str, key: str, **options: Any):
        """A context manager that runs a block at most once per (scope, key); see `Operation`."""
        from ._once import Operation
        return Operation(self, scope, key, **options)

    def exactly_once(self, scope: str, key: Union[str, Callable[..., str]],
                     **options: Any) -> Callable:
        """A decorator: the function runs at most once per key; see `exactly_once`."""
        from ._once import exactly_once
        return exactly_once(self, scope, key, **options)

    # --- plumbing -------------------------------------------------------------------------

    def _wait_for_change(self, scope: str, key: str, deadline: float,
                         retry_after: Optional[float]) -> bool:
        """Poll the record until it leaves `in_progress` or its lease may have run out (the
        claim then decides); False if `deadline` comes first. Short reads with growing,
        jittered pauses: unlike a long-poll (`lookup(wait=...)`), a crowd of waiting
        duplicates holds no server thread that the holder's `complete` would need."""
        clock, n = self.retry.clock, 0
        lease_end = clock() + retry_after if retry_after is not None else None
        while True:
            left = deadline - clock()
            if left <= 0:
                return False
            ceiling = min(MAX_POLL_INTERVAL, FIRST_POLL_INTERVAL * 2 ** n)
            delay = min(left, ceiling * (0.5 + 0.5 * self.retry.random()))  # equal jitter
            if lease_end is not None:
                delay = min(delay, max(0.0, lease_end - clock()))
            self.retry.sleep(delay)
            n += 1
            if lease_end is not None and clock() >= lease_end:
                return True
            try:
                if self.lookup(scope, key).state != "in_progress":
                    return True
            except (NotFound, Expired):
                return True  # gone meanwhile: the next claim starts afresh

    def _session_here(self) -> requests.Session:
        if self._session is not None:
            return self._session
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
            with self._lock:
                self._owned.append(session)
        return session

    def _clone(self, *, retry: RetryPolicy, timeout: float) -> KeyStore:
        """The same service and token with other limits (and sessions of its own)."""
        return KeyStore(self.url, self._token, session=self._session, timeout=timeout,
                        retry=retry)

    def _drop_thread_session(self) -> None:
        """Close this thread's own session (a finished helper thread calls this)."""
        session = getattr(self._local, "session", None)
        if session is None:
            return
        del self._local.session
        with self._lock:
            if session in self._owned:
                self._owned.remove(session)
        session.close()

    def _call(self, method: str, path: str, body: Optional[dict] = None, *,
              params: Optional[dict] = None, repeatable: bool = True,
              timeout: Optional[float] = None) -> dict:
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json",
                   "User-Agent": f"keystore-client-python/{__version__}"}
        retrying = self.retry.start()
        while True:
            try:
                response = send(self._session_here(), method, self.url + path,
                                headers=headers, json_body=body, params=params,
                                timeout=timeout or self.timeout)
            except ConnectError:
                if retrying.pause():
                    continue
                raise
            except OutcomeUnknown:
                if repeatable and retrying.pause():
                    continue
                raise
            if response.status_code < 300:
                return json_body(response)
            error = error_from(response)
            if isinstance(error, (RateLimited, Unavailable)) and retrying.pause(error.retry_after):
                continue
            raise error


def _present(**fields: Any) -> dict:
    return {k: v for k, v in fields.items() if v is not None}


def _result_json(result: ResultLike) -> Optional[dict]:
    if result is None or isinstance(result, dict):
        return result
    return result.to_json()
