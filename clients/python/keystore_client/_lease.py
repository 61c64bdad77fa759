"""A background heartbeat that keeps held leases alive while long work runs.

Every third of the lease it calls `extend` for each lease it holds, so two missed beats in a
row still leave a lease live. If the process dies, the beats stop and the leases run out: the
records then go to reconciliation (or to the next attempt, under `on_stale: retry`), never to
a silent second run. One keeper holds one lease (the exactly-once helper) or a changing set of
one scope's leases (the ones a batch claim took, kept alive until each one's turn comes).
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Optional

from ._exceptions import AlreadyCompleted, APIError, Expired, KeyStoreError, LeaseLost, NotFound
from ._retry import RetryPolicy

if TYPE_CHECKING:  # pragma: no cover
    from ._client import KeyStore

FINAL = (LeaseLost, AlreadyCompleted, NotFound, Expired)  # extending again cannot help


class LeaseKeeper:
    """Extends held leases of `scope` every `lease_seconds / 3` until stopped.

    `LeaseKeeper(ks, scope, key, token, lease_seconds)` holds one lease; without a key it
    starts empty, and `hold` / `drop` change the set while it runs. A lease that was taken
    away (a newer attempt or a person's resolution replaced it) is no longer extended and its
    error is kept: `lost` (the first such error) and `lost_of(key)`. Its work should then not
    be reported as done by this holder.
    """

    def __init__(self, ks: KeyStore, scope: str, key: Optional[str] = None,
                 lease_token: Optional[str] = None, lease_seconds: int = 60):
        self.scope, self.lease_seconds = scope, lease_seconds
        self.interval = lease_seconds / 3
        # One beat never outlasts its interval: a slow or failing extend is a missed beat,
        # and stopping the keeper (which waits for a beat in flight) stays quick.
        self.ks = ks._clone(timeout=max(1.0, min(ks.timeout, self.interval)),
                            retry=RetryPolicy(tries=3, base_delay=0.05,
                                              max_delay=self.interval / 4,
                                              budget=self.interval))
        self.beats = 0  # extends that succeeded
        self._held: dict[str, str] = {}
        self._lost: dict[str, APIError] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"keystore-lease:{scope}",
                                        daemon=True)  # a daemon dies with the process
        if key is not None and lease_token is not None:
            self.hold(key, lease_token)

    @property
    def lost(self) -> Optional[APIError]:
        with self._lock:
            return next(iter(self._lost.values()), None)

    def lost_of(self, key: str) -> Optional[APIError]:
        with self._lock:
            return self._lost.get(key)

    def hold(self, key: str, lease_token: str) -> None:
        """Extend this lease from the next beat on."""
        with self._lock:
            self._held[key] = lease_token
            self._lost.pop(key, None)

    def drop(self, key: str) -> None:
        """Stop extending `key` (before completing or releasing it); a beat in flight may
        still extend it once, which the service answers harmlessly."""
        with self._lock:
            self._held.pop(key, None)

    def start(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop beating and wait for a beat in flight to finish."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                self._beat()
        finally:
            self.ks._drop_thread_session()

    def _beat(self) -> None:
        with self._lock:
            held = list(self._held.items())
        for key, token in held:
            if self._stop.is_set():
                return
            try:
                self.ks.extend(self.scope, key, token, self.lease_seconds)
                self.beats += 1
            except FINAL as exc:
                with self._lock:
                    if self._held.get(key) == token:  # still ours to keep: it was lost
                        del self._held[key]
                        self._lost[key] = exc
            except KeyStoreError:
                continue  # a missed beat; the lease has two more intervals left
