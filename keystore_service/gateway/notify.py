"""The ingest's NOTIFY to the relays of other processes (PostgreSQL), coalesced."""
from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

log = logging.getLogger("keystore.ingest")


class Notifier:
    """NOTIFY keystore_hooks for the relays of every instance (PostgreSQL), sent by a thread
    of its own after the commits it tells of, one at a time: the ingests that commit while
    one is in flight share the next. Inside each ingest's transaction, NOTIFY serialised
    every ingest's commit (PostgreSQL takes one database-wide lock from a notifying
    transaction's commit until its end, WAL flush included; bench/NOTES.md, "The
    gateway"). A lost NOTIFY costs a relay its wake-up, not the event: the 1 s sweep
    finds it."""

    def __init__(self, send: Callable[[], None]):
        self.send = send
        self._due = threading.Event()
        self._lock = threading.Lock()
        self._pid = 0  # the thread is started in the process that notifies (after a fork)
        self.sent = 0

    def notify(self) -> None:
        self._due.set()
        if self._pid != os.getpid():
            with self._lock:
                if self._pid != os.getpid():
                    self._pid = os.getpid()
                    threading.Thread(target=self._run, name="keystore-notify",
                                     daemon=True).start()

    def _run(self) -> None:
        while True:
            self._due.wait()
            self._due.clear()
            try:
                self.send()
                self.sent += 1
            except Exception as exc:  # noqa: BLE001 - the sweep stands in for it
                log.warning("NOTIFY keystore_hooks failed (%s)", type(exc).__name__)
                time.sleep(0.5)
