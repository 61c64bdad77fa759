"""The relay: a thread that takes due events and forwards them with a pool of threads.

It wakes when its own process accepted an event (wake()), when PostgreSQL delivers a
NOTIFY on `keystore_hooks` (any instance accepted one), and at least once a second for due
retries, expired leases and missed signals. Any number of relays, in any processes and on
any hosts sharing the database, work side by side: each attempt is leased.

Besides its `concurrency` slots a relay has spare ones (SPARE_SHARE of them, at least one)
for idle sources only: while slow destinations hold every slot (a source's destinations'
max_in_flight add up past the slots: ten destinations at 4 are 40), a source with nothing in
flight anywhere still gets its event out at once (storage/take.py, _IDLE), rather than after
a slot frees, which a destination that times out delays by its timeout_seconds. The spare
slots are looked at only once every slot has been taken for FULL_SECONDS (forwards that end
sooner free slots that the take gives out in turn: the spare ones would only change the
turns' shares), and then at most every SPARE_LOOK_SECONDS.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

from keystore_service.domain.records import SECOND, Micros
from keystore_service.errors import Unavailable
from keystore_service.gateway.forwarding import Forwarding, Job, Result
from keystore_service.gateway.rules import Outcome
from keystore_service.service.grouping import Groups

log = logging.getLogger("keystore.relay")
SWEEP_SECONDS = 1.0  # docs/webhooks/README.md: every forwarder sweeps at least once a second
# A rate-held source is looked at again when its next slot comes, but not sooner than this
# after a take: a fast rate (up to 1,000,000/s) is served by the burst each take leases, not
# by a take per event.
RATE_WAIT_FLOOR = 0.005
SPARE_SHARE = 4  # a relay has concurrency // SPARE_SHARE spare slots (4 of 16), at least 1
# While the slots are full every accepted event wakes the relay: its look for idle sources'
# events is made at most this often (a take's cost, under a flood, 10 times a second at most;
# an idle source's event waits 0.1 s more at worst).
SPARE_LOOK_SECONDS = 0.1
FULL_SECONDS = 0.25  # every slot taken this long: the forwards are slow, the spare slots open


def holder_name(suffix: str = "") -> str:
    return f"{socket.gethostname()[:40]}:{os.getpid()}{suffix}"[:64]


class Relay:
    def __init__(self, forwarding: Forwarding, concurrency: int, holder: Optional[str] = None,
                 listen_url: Optional[str] = None):
        self.forwarding, self.concurrency = forwarding, concurrency
        self.spare = max(1, concurrency // SPARE_SHARE)
        self._spare_at = 0.0  # when the next look for idle sources' events may be made
        self._full_since: Optional[float] = None  # since when every slot has been taken
        self.holder = holder or holder_name()
        self.listen_url = listen_url
        self._wake = threading.Event()
        self._stop = threading.Event()
        # A forward's thread then writes its end (settle), which took three times as long
        # as the forward itself to a quick destination under load (bench/NOTES.md, "The
        # gateway"): its slot is free again once the answer is in, and up to `concurrency`
        # more threads may be writing ends meanwhile.
        self._busy = 0  # forwards in flight: the slots
        self._threads = 0  # taken events not yet settled: forwarding or writing their end
        self._left = False  # the last take left due events behind
        self._owed = False  # a wake-up came while no slot was free
        self._sweep_at = 0.0  # when the next take also takes paused sources' ended events
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(2 * concurrency + self.spare,
                                        thread_name_prefix="keystore-forward")
        # Forwards that end while another's settle is being written are settled together,
        # in one transaction (group commit, as the claims: service/grouping.py).
        self._settles: Groups[tuple[Job, Result], Outcome] = Groups(
            lambda ended: self.forwarding.settle_many(self.holder, ended),
            lambda one: self.forwarding.settle(one[0], self.holder, one[1]),
            limit=2 * concurrency)
        self._thread = threading.Thread(target=self._run, name="keystore-relay", daemon=True)
        self.counts = {**{o.value: 0 for o in Outcome}, "lost_lease": 0}

    def start(self) -> Relay:
        self._thread.start()
        if self.listen_url:
            threading.Thread(target=self._listen, name="keystore-relay-listen",
                             daemon=True).start()
        return self

    def wake(self) -> bool:
        """Look for due events now; True when this relay has a free slot to take one."""
        self._wake.set()
        with self._lock:
            if self._free() > 0:
                return not self._stop.is_set()
            self._owed = True
            return False

    def _free(self, spare: bool = False) -> int:
        """The slots free (with `spare`: the spare ones too), and threads to settle them."""
        more = self.spare if spare else 0
        return min(self.concurrency + more - self._busy,
                   2 * self.concurrency + more - self._threads)

    def stop(self, wait: float = 20.0) -> None:
        """Stop taking events; wait up to `wait` s for forwards in flight (an unfinished
        one is taken over by another relay when its lease runs out)."""
        self._stop.set()
        self._wake.set()
        self._thread.join(wait)
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()  # before taking: a wake-up from now on is not missed
            with self._lock:
                free = self._free()
                if free > 0:
                    self._owed = False
                spare = self._free(spare=True) if free <= 0 else 0
                full = self._full_since
            taken: list[Job] = []
            slot: Optional[Micros] = None
            wait: Optional[float] = None
            if spare > 0 and full is not None:  # an idle source's event may take a spare one
                wait = max(self._spare_at, full + FULL_SECONDS) - time.monotonic()
                if wait <= 0:
                    self._spare_at = time.monotonic() + SPARE_LOOK_SECONDS
                    try:
                        taken = self.forwarding.take_paced(self.holder, spare, idle=True)[0]
                    except Exception:  # the database may be down: the next tick tries again
                        log.exception("taking idle sources' events failed")
            elif free > 0:
                # once a second, the events whose window ended while their source was
                # paused, too (a scan of the paused sources' queues: not every take's)
                ended = time.monotonic() >= self._sweep_at
                if ended:
                    self._sweep_at = time.monotonic() + SWEEP_SECONDS
                try:
                    taken, self._left, slot = self.forwarding.take_paced(self.holder, free,
                                                                         ended)
                except Exception:  # the database may be down: try again at the next tick
                    log.exception("taking due events failed")
            for job in taken:
                with self._lock:
                    self._busy += 1
                    self._threads += 1
                    if self._busy >= self.concurrency and self._full_since is None:
                        self._full_since = time.monotonic()
                self._pool.submit(self._one, job)
            pause = self._pause(slot)
            self._wake.wait(pause if wait is None or wait <= 0 else min(pause, wait))

    def _pause(self, slot: Optional[Micros]) -> float:
        """How long to wait for a wake-up: SWEEP_SECONDS, or until a source that its rate
        held has room again (a slot the take computed, after its `now`), but at least
        RATE_WAIT_FLOOR: never a busy loop."""
        if slot is None:
            return SWEEP_SECONDS
        left = (slot - self.forwarding.clock()) / SECOND
        return min(SWEEP_SECONDS, max(RATE_WAIT_FLOOR, left))

    def _one(self, job: Job) -> None:
        try:
            try:
                result = self.forwarding.attempt(job)
            finally:
                with self._lock:
                    self._busy -= 1
                    if self._busy < self.concurrency:
                        self._full_since = None
                    again = self._left or self._owed
                if again:  # its slot is free for an event that is waiting
                    self._wake.set()
            outcome = self._settle(job, result)
            with self._lock:
                self.counts[outcome.value if outcome else "lost_lease"] += 1
        except Exception:  # a lost database: the lease runs out and another attempt follows
            log.exception("settling a forward failed")
        finally:
            with self._lock:
                self._threads -= 1
            # its source has one fewer in flight (max_in_flight), and a retry may be due
            self._wake.set()

    def _settle(self, job: Job, result: Result) -> Optional[Outcome]:
        """Write the attempt's end, again and again while the database is unavailable, for
        as long as the attempt's lease lasts: the destination has answered (it may have
        acted), and an answer not written down means forwarding the event again once the
        lease runs out. Safe to repeat: a write that landed although its answer was lost
        makes the next one find the attempt settled (None), not write it twice."""
        pause = 0.1
        while True:
            try:
                return self._settles.submit(job.event.id, (job, result))
            except Unavailable:
                left = (job.event.lease_until - self.forwarding.clock()) / 1e6  # micros
                if left < pause or self._stop.is_set():
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 1.0)

    def _listen(self) -> None:
        """LISTEN keystore_hooks on a connection of its own; reconnects after a failure."""
        import psycopg
        pause = 0.5
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.listen_url, autocommit=True,
                                     connect_timeout=5) as conn:
                    conn.execute("LISTEN keystore_hooks")
                    pause = 0.5
                    self.wake()  # anything accepted while we were not listening
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=SWEEP_SECONDS, stop_after=1):
                            self.wake()
            except Exception as exc:  # the database restarts: listen again, polling meanwhile
                log.warning("LISTEN keystore_hooks lost (%s); again in %.1f s",
                            type(exc).__name__, pause)
                self._stop.wait(pause)
                pause = min(pause * 2, 10.0)

