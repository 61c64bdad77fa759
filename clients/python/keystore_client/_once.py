"""The exactly-once helper: a context manager (`Operation`) and a decorator (`exactly_once`).

    claim ──acquired──> run the block ──returns────────────> complete (succeeded)
      │                     │      └──raises, transient────> release: the next try acquires
      │                     └──raises, anything else───────> nothing: the lease runs out and
      │                        (crash, timeout, kill)         the record goes to reconciliation
      └──replay──> the stored result; the block's work is skipped

An exception is transient only when the caller says so (`transient=`): the helper cannot know
whether a half-done side effect happened, so by default an error is an unknown outcome, which
a person resolves, rather than a guess that could run the effect twice. Errors of this package
(say, a `complete` that could not reach the service after the effect) are never transient.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Optional, Union

from ._exceptions import KeyStoreError, OperationFailed
from ._lease import LeaseKeeper
from ._models import Claimed, Record, Result, VersionLike, new_lease_token
from ._retry import RetryPolicy

if TYPE_CHECKING:  # pragma: no cover
    from ._client import KeyStore

Transient = Union[type, tuple, Callable[[BaseException], bool]]
DEFAULT_LEASE_SECONDS = 60  # kept alive in the background; a crash is noticed after 60 s
DEFAULT_WAIT_SECONDS = 30  # how long a duplicate waits for the first attempt: the most one
# claim may wait (docs/api.md's limit for `wait_seconds`)


class Operation:
    """One exactly-once operation, used as `with ks.once(scope, key, ...) as op:`.

    On enter it claims (the service waits up to `wait` seconds, at most 30, for another
    attempt's live lease), proposing `lease_token`, made once for this operation: a claim
    whose answer was lost is repeated with it and resumes. If `op.replayed`, the block must
    not act: `op.result` is the stored result. Otherwise the block acts and reports with
    `op.succeed(...)` / `op.fail(...)` (or just returns: then it completes as succeeded
    without a result). Raises what `KeyStore.claim` raises: InProgress when the other
    attempt still runs after the wait (try later), NeedsReconciliation or
    FingerprintMismatch (a person decides).
    """

    def __init__(self, ks: KeyStore, scope: str, key: str, *, payload: Any = None,
                 fingerprint: Optional[str] = None, version: VersionLike = None,
                 transient: Transient = (),
                 lease_seconds: int = DEFAULT_LEASE_SECONDS, ttl_seconds: Optional[int] = None,
                 on_stale: Optional[str] = None, wait: float = DEFAULT_WAIT_SECONDS,
                 keep_alive: bool = True, lease_token: Optional[str] = None):
        self.ks, self.scope, self.key = ks, scope, key
        self.payload, self.fingerprint, self.version = payload, fingerprint, version
        self.transient = transient
        self.lease_seconds, self.ttl_seconds, self.on_stale = lease_seconds, ttl_seconds, on_stale
        self.wait, self.keep_alive = wait, keep_alive
        self.lease_token = lease_token or new_lease_token()  # proposed by every claim of it
        self.claimed: Optional[Claimed] = None
        self.record: Optional[Record] = None  # the latest record this operation saw
        self.released_by: Optional[BaseException] = None  # the transient error it gave back on
        self.keeper: Optional[LeaseKeeper] = None
        self._open = False  # holding a lease that is neither completed, released nor left

    # --- what the block sees ------------------------------------------------------------

    @property
    def replayed(self) -> bool:
        return self.claimed is not None and self.claimed.replayed

    @property
    def result(self) -> Optional[Result]:
        return self.record.result if self.record else None

    @property
    def attempt(self) -> int:
        return self.record.attempt if self.record else 0

    @property
    def idempotency_key(self) -> str:
        """`scope:key`: pass it as the downstream API's own idempotency key. With a version,
        `scope:key@version` (the version as the service stores it): a newer version is a new
        intent, which the downstream API must not answer with the old version's result."""
        stored = self.record.version if self.record is not None else None
        if self.version is not None and stored is not None:
            return f"{self.scope}:{self.key}@{stored}"
        return f"{self.scope}:{self.key}"

    def succeed(self, *, resource_id: Optional[str] = None, status_code: Optional[int] = None,
                body: Any = None) -> Record:
        """Complete now as succeeded with this result; repeats will replay it."""
        return self._complete("succeeded", Result(resource_id, status_code, body))

    def fail(self, *, resource_id: Optional[str] = None, status_code: Optional[int] = None,
             body: Any = None) -> Record:
        """Complete now as a permanent failure; repeats will replay it, not retry it."""
        return self._complete("failed", Result(resource_id, status_code, body))

    def release(self, reason: Optional[str] = None) -> Record:
        """Give the attempt back now (a transient failure): the next claim tries again."""
        self._require_open()
        self._stop_keeping()
        self.record = self.ks.release(self.scope, self.key, self._token(), reason=reason)
        self._open = False
        return self.record

    def abandon(self) -> None:
        """Stop holding without an outcome: the lease runs out and the record goes to
        reconciliation (or to the next attempt under `on_stale="retry"`)."""
        self._stop_keeping()
        self._open = False

    def checkpoint(self, step: str, resource_id: Optional[str] = None) -> Record:
        """Record how far the work got (an invoice created as INV-42), for whoever must
        resolve an attempt that never finishes."""
        self._require_open()
        self.record = self.ks.extend(self.scope, self.key, self._token(), self.lease_seconds,
                                     checkpoint=step, resource_id=resource_id)
        return self.record

    # --- the protocol -------------------------------------------------------------------

    def __enter__(self) -> Operation:
        self.claimed = self.ks.claim(
            self.scope, self.key, payload=self.payload, fingerprint=self.fingerprint,
            version=self.version, ttl_seconds=self.ttl_seconds, lease_seconds=self.lease_seconds,
            on_stale=self.on_stale, wait=self.wait, lease_token=self.lease_token)
        self.record = self.claimed.record
        if self.claimed.acquired:
            self._open = True
            if self.keep_alive:
                self.keeper = LeaseKeeper(self.ks, self.scope, self.key, self._token(),
                                          self.lease_seconds).start()
        return self

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> bool:
        if not self._open:
            self._stop_keeping()
            return False
        if exc is None:
            self.succeed()
        elif (isinstance(exc, Exception) and not isinstance(exc, KeyStoreError)
              and self.is_transient(exc)):
            self.released_by = exc
            self.release(reason=f"transient error: {type(exc).__name__}")
        else:
            self.abandon()  # an unknown outcome is for the lease and a person, not a guess
        return False

    def is_transient(self, exc: BaseException) -> bool:
        t = self.transient
        if isinstance(t, (type, tuple)):
            return isinstance(exc, t)
        return bool(t(exc))

    def _complete(self, state: str, result: Result) -> Record:
        self._require_open()
        self._stop_keeping()
        self.record = self.ks.complete(self.scope, self.key, self._token(), state=state,
                                       result=result)
        self._open = False
        return self.record

    def _stop_keeping(self) -> None:
        if self.keeper is not None:
            self.keeper.stop()

    def _require_open(self) -> None:
        if not self._open:
            raise RuntimeError("this operation holds no lease (it was replayed or is already "
                               "completed, released or abandoned)")

    def _token(self) -> str:
        assert self.claimed is not None and self.claimed.lease_token is not None
        return self.claimed.lease_token


def exactly_once(ks: KeyStore, scope: str, key: Union[str, Callable[..., str]], *,
                 payload: Any = None, version: Any = None, transient: Transient = (),
                 retry: Optional[RetryPolicy] = None, **options: Any) -> Callable:
    """Decorate a function so that it runs at most once per key (and version).

    `key` (and `payload` and `version`, if callable) are computed from the call's arguments.
    With a version, the function runs again for a newer version of a finished key; a call
    with an equal or older version gets the stored result of the newest one run. The return
    value is stored as the result's body and returned, as decoded JSON, to this caller and
    to every later or concurrent caller of the same key. A `transient` exception releases
    the attempt and the call is tried again under `retry` (default: the client's policy);
    any other exception is left to the lease and reconciliation. A replay of an operation
    recorded as failed raises OperationFailed. A concurrent caller waits for the running one
    up to `wait` seconds (default and most 30) and then gets its value; after that, or when
    the service has no free waiting seat for it, InProgress (call again later).
    """
    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            k = key(*args, **kwargs) if callable(key) else key
            p = payload(*args, **kwargs) if callable(payload) else payload
            v = version(*args, **kwargs) if callable(version) else version
            retrying = (retry or ks.retry).start()
            while True:
                op = Operation(ks, scope, k, payload=p, version=v, transient=transient,
                               **options)
                try:
                    with op:
                        if op.replayed:
                            return _replayed_value(op)
                        return _run_and_complete(op, fn, args, kwargs)
                except Exception as exc:
                    if op.released_by is exc and retrying.pause():
                        continue
                    raise
        return wrapper
    return decorate


def _run_and_complete(op: Operation, fn: Callable, args: tuple, kwargs: dict) -> Any:
    value = fn(*args, **kwargs)
    try:
        value = json.loads(json.dumps(value))  # what replays will see, so everyone agrees
    except (TypeError, ValueError):
        op.succeed()
        raise TypeError(f"{fn.__name__} returned a value that is not JSON; the operation was "
                        "recorded as succeeded without a result") from None
    op.succeed(body=value)
    return value


def _replayed_value(op: Operation) -> Any:
    record = op.record
    assert record is not None
    if record.state == "failed":
        raise OperationFailed(f"{op.scope}/{op.key} was recorded as a permanent failure",
                              record=record)
    return record.result.body if record.result else None

