"""`KeyStore`: the calls of docs/api.md, each returning a typed result or raising one error class.

Retries happen here and only where they are safe: a connection that was never made, a 429 or
503 (the service says nothing was written), and a lost answer on the calls docs/api.md makes
safe to repeat. Since contract v1.1 that includes claims: every claim proposes a lease token
of its own (one per call, or the caller's), so a repeat after a lost answer resumes the
attempt the first one acquired (`resumed`) instead of meeting it as `in_progress`; the same
holds for a batch claim, item by item. The others are a complete with the same token and
result, a release, an extend, a lookup and an expire. `claim(wait=...)` lets the service wait
(`wait_seconds`) while another attempt's live lease holds the record: one request, no loop.
"""
from __future__ import annotations

import dataclasses
import math
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Optional, Union

import requests

from ._batch import BatchItem, BatchResult, items_json, results_from
from ._exceptions import ConnectError, OutcomeUnknown, RateLimited, Unavailable
from ._models import Claimed, Record, Result, VersionLike, proposed_token, version_json
from ._retry import RetryPolicy
from ._send import Sent, request_json, send_wait
from ._transport import error_from, json_body, send

__version__ = "0.1.0"
DEFAULT_TIMEOUT = 10.0  # seconds per HTTP request; a claim or lookup with a wait adds it
MAX_WAIT_SECONDS = 30  # docs/api.md's limit on one claim's `wait_seconds`
# A batch of 1,000 takes about a second on an idle machine and many times that on a loaded
# one; a timeout there loses every lease the batch took, so each item adds to the timeout.
BATCH_SECONDS_PER_ITEM = 0.02
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

    # --- docs/api.md's calls --------------------------------------------------------------

    def claim(self, scope: str, key: str, *, payload: Any = None,
              fingerprint: Optional[str] = None, version: VersionLike = None,
              ttl_seconds: Optional[int] = None, lease_seconds: Optional[int] = None,
              on_stale: Optional[str] = None, wait: float = 0,
              lease_token: Optional[str] = None) -> Claimed:
        """Claim (scope, key) before acting. Returns `acquired` (with the lease token) or
        `replay` (with the stored result). With `version` (an int, an RFC 3339 str or an aware
        datetime), a finished record is acquired again only for a newer version.

        `wait` (0-30 s, whole seconds, rounded up): while another attempt's live lease holds
        the record, the service waits up to that long and answers by what that attempt did:
        `replay` if it completed, `acquired` if it released; InProgress if it still runs (or
        at once, when the service has no free waiting seat for this token).
        `lease_token`: the token to propose (`new_lease_token()`); by default one is made
        for this call. A claim whose answer was lost is repeated with it, and resumes
        (`resumed` is True) if the lost one had acquired; pass your own to repeat the claim
        yourself after an OutcomeUnknown.

        Raises InProgress, NeedsReconciliation, FingerprintMismatch, InvalidRequest (also for
        a version of the other kind than the record's), or another KeyStoreError; ValueError
        for a `wait` outside 0-30 or a malformed `lease_token`, before any request."""
        wait_seconds = _wait_seconds(wait)
        body = _present(scope=scope, key=key, payload=payload, fingerprint=fingerprint,
                        version=version_json(version), ttl_seconds=ttl_seconds,
                        lease_seconds=lease_seconds, on_stale=on_stale,
                        lease_token=proposed_token(lease_token), wait_seconds=wait_seconds)
        waited = wait_seconds or 0
        return Claimed.from_json(self._call("POST", "/v1/claim", body,
                                            timeout=self.timeout + waited, budget_extra=waited))

    def claim_batch(self, scope: str, items: Iterable[Union[BatchItem, Mapping]], *,
                    ttl_seconds: Optional[int] = None, lease_seconds: Optional[int] = None,
                    on_stale: Optional[str] = None) -> list[BatchResult]:
        """Claim up to 1,000 keys of one scope in one transaction; items are BatchItems or
        dicts with the same fields (`key`, `payload` | `fingerprint`, `version`). Returns one
        BatchResult per item, in order, each the outcome the item would have had if claimed
        alone in that order (a key twice: the first acquires, the rest are `in_progress`).
        Every `acquired` item must be completed or released by the caller.

        Each item proposes its own lease token (its `lease_token`, or one made for this
        call), so a batch whose answer was lost is sent again as it was, and every item the
        lost one acquired answers `acquired` again with `resumed` True.

        No items: [] without a request. More than 1,000: ValueError before any request (one
        transaction is one batch; split them yourself and finish each batch's leases).
        Raises InvalidRequest / PayloadTooLarge when the service refused the whole batch
        (then nothing was written), and OutcomeUnknown when no answer came back after the
        retries (send the same BatchItems, with their tokens, again to resume them)."""
        typed, wire = items_json(items)
        if not typed:
            return []
        body = _present(scope=scope, items=wire, ttl_seconds=ttl_seconds,
                        lease_seconds=lease_seconds, on_stale=on_stale)
        timeout = self.timeout + BATCH_SECONDS_PER_ITEM * len(typed)
        answer = self._call("POST", "/v1/claim/batch", body, timeout=timeout)
        return results_from(answer, typed)

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

    def send(self, scope: str, key: str, connection: str, request: Optional[Mapping] = None,
             *, method: Optional[str] = None, path: Optional[str] = None, json: Any = None,
             body: Optional[bytes] = None, headers: Optional[Mapping[str, str]] = None,
             payload: Any = None, fingerprint: Optional[str] = None,
             resource_id_pointer: Optional[str] = None, wait_seconds: float = 10) -> Sent:
        """Have the key store make one request to `connection`'s API at most once per
        (scope, key) (`POST /v1/send`; see the module `_send`). The request is `request` (a
        dict: method, path, headers, json | body_base64) or the keywords (`method` default
        POST, `path` relative to the connection's base URL, `json` or raw `body` bytes);
        `payload` / `fingerprint` as for a claim; `resource_id_pointer` (e.g. "/id") picks
        the resource id out of the API's answer. Returns `Sent` (outcome sent, failed,
        accepted or replay). Raises InProgress (`retry_after`) while the first send runs,
        FingerprintMismatch, NeedsReconciliation, NotFound (no such connection).

        Retried only where the request provably never reached the service (no connection)
        or the service said nothing was written (429, 503); a lost answer raises
        OutcomeUnknown at once. Sending again with the same arguments is always safe: the
        key store never sends twice."""
        waited = send_wait(wait_seconds)
        wire = _present(scope=scope, key=key, connection=connection,
                        request=request_json(request, method=method, path=path, json=json,
                                             body=body, headers=headers),
                        payload=payload, fingerprint=fingerprint,
                        resource_id_pointer=resource_id_pointer, wait_seconds=waited)
        return Sent.from_json(self._call("POST", "/v1/send", wire, timeout=self.timeout + waited,
                                         budget_extra=waited, repeat_lost=False))

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
              params: Optional[dict] = None, timeout: Optional[float] = None,
              budget_extra: float = 0, repeat_lost: bool = True) -> dict:
        """One call of docs/api.md, retried within the policy where that is safe: no
        connection, 429 / 503, and a lost answer (the claims carry their proposed lease
        tokens) unless `repeat_lost` is False (a send: its lost answer is the caller's).
        `budget_extra`: seconds the service may wait on purpose (a claim's or a send's
        wait), added to the retry budget."""
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json",
                   "User-Agent": f"keystore-client-python/{__version__}"}
        policy = self.retry
        if budget_extra:
            policy = dataclasses.replace(policy, budget=policy.budget + budget_extra)
        retrying = policy.start()
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
                if repeat_lost and retrying.pause():
                    continue
                raise
            if response.status_code < 300:
                return json_body(response)
            error = error_from(response)
            if isinstance(error, (RateLimited, Unavailable)) and retrying.pause(error.retry_after):
                continue
            raise error


def _wait_seconds(wait: float) -> Optional[int]:
    """A claim's `wait` as docs/api.md's `wait_seconds` (whole seconds, 1-30), or None for
    no wait; ValueError outside 0-30 (one claim waits at most 30 s: ask again after that)."""
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or math.isnan(wait):
        raise TypeError("wait is a number of seconds")
    if not 0 <= wait <= MAX_WAIT_SECONDS:
        raise ValueError(f"wait is 0-{MAX_WAIT_SECONDS} seconds (the service's limit for one "
                         f"claim), not {wait}")
    return math.ceil(wait) or None


def _present(**fields: Any) -> dict:
    return {k: v for k, v in fields.items() if v is not None}


def _result_json(result: ResultLike) -> Optional[dict]:
    if result is None or isinstance(result, dict):
        return result
    return result.to_json()
