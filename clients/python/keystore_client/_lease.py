"""A background heartbeat that keeps a held lease alive while long work runs.

Every third of the lease it calls `extend`, so two missed beats in a row still leave the lease
live. If the process dies, the beats stop and the lease runs out: the record then goes to
reconciliation (or to the next attempt, under `on_stale: retry`), never to a silent second run.
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
    """Extends (scope, key)'s lease every `lease_seconds / 3` until stopped.

    `lost` is set to the error when the lease was taken away (a newer attempt or a person's
    resolution replaced it); the work should then not be reported as done by this holder.
    """

    def __init__(self, ks: KeyStore, scope: str, key: str, lease_token: str,
                 lease_seconds: int):
        self.scope, self.key = scope, key
        self.lease_token, self.lease_seconds = lease_token, lease_seconds
        self.interval = lease_seconds / 3
        # One beat never outlasts its interval: a slow or failing extend is a missed beat,
        # and stopping the keeper (which waits for a beat in flight) stays quick.
        self.ks = ks._clone(timeout=max(1.0, min(ks.timeout, self.interval)),
                            retry=RetryPolicy(tries=3, base_delay=0.05,
                                              max_delay=self.interval / 4,
                                              budget=self.interval))
        self.lost: Optional[APIError] = None
        self.beats = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"keystore-lease:{scope}",
                                        daemon=True)  # a daemon dies with the process

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
            self._beat_until_stopped()
        finally:
            self.ks._drop_thread_session()

    def _beat_until_stopped(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.ks.extend(self.scope, self.key, self.lease_token, self.lease_seconds)
                self.beats += 1
            except FINAL as exc:
                self.lost = exc
                return
            except KeyStoreError:
                continue  # a missed beat; the lease has two more intervals left
