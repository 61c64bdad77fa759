"""The sender's loop (issue 28): one thread per process beside the relay (started and stopped
with it: Gateway.start_relay) that takes due sends while it has free slots and hands each to
sender.Sender on a small pool of threads."""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from keystore_service.gateway.sender import Sender
from keystore_service.storage.sends import Taken

log = logging.getLogger("keystore.sender")
SWEEP_SECONDS = 1.0  # it looks at least this often (due retries, leases run out)


class SendLoop:
    """One thread per process beside the relay: takes due sends while it has free slots
    and makes them on a pool of `concurrency` threads; at least once a second, and at once
    when woken (a send queued in this process)."""

    def __init__(self, sender: Sender, concurrency: int, holder: str,
                 alive: Callable[[], bool] = lambda: True):
        self.sender, self.concurrency, self.holder, self.alive = \
            sender, concurrency, holder, alive
        self._stop, self._wake = threading.Event(), threading.Event()
        self._busy = 0
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="keystore-send")
        self._thread = threading.Thread(target=self._run, name="keystore-sender", daemon=True)

    def start(self) -> SendLoop:
        self._thread.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def stop(self, wait: float = 20.0) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(wait)
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _run(self) -> None:
        while not self._stop.is_set() and self.alive():
            self._wake.clear()
            with self._lock:
                free = self.concurrency - self._busy
            taken: list[Taken] = []
            if free > 0:
                try:
                    taken = self.sender.take(self.holder, free)
                except Exception:  # the database away: tried again at the next tick
                    log.exception("taking due sends failed")
            for job in taken:
                with self._lock:
                    self._busy += 1
                self._pool.submit(self._one, job)
            self._wake.wait(SWEEP_SECONDS)
        self._pool.shutdown(wait=False)  # the relay stopped: requests in flight finish

    def _one(self, job: Taken) -> None:
        try:
            self.sender.run(job)
        except Exception:  # its lease runs out and the send is taken over
            log.exception("send %s failed to settle", job.send.id)
        finally:
            with self._lock:
                self._busy -= 1
            self._wake.set()
