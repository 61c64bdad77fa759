"""Background work: the reconciler finds leases that ran out, the sweeper purges expired
records. Each works in bounded batches of short transactions, and is safe with several
workers and instances at once: rows are claimed with FOR UPDATE SKIP LOCKED on PostgreSQL
(SQLite's write lock serialises), every change is a compare-and-set, and a job lock in the
database lets one worker at a time do the timed runs.
"""
from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Optional

from keystore_service.domain import records as domain
from keystore_service.domain.records import Record, State
from keystore_service.service.claims import KeyStoreService
from keystore_service.storage.maintenance import Maintenance
from keystore_service.storage.reports import Reports, day_of

log = logging.getLogger("keystore.jobs")
BATCH = 500  # rows per transaction: short locks, and progress that survives a kill


class Jobs:
    def __init__(self, service: KeyStoreService, reports: Reports, maintenance: Maintenance,
                 keep_finished_seconds: int = 0, keep_unresolved_seconds: int = 30 * 86_400,
                 keep_report_days: int = 400):
        self.service = service
        self.records = service.records
        self.db = service.records.db
        self.reports = reports
        self.keep_finished = keep_finished_seconds * domain.SECOND
        self.keep_unresolved = keep_unresolved_seconds * domain.SECOND
        self.keep_report_days = keep_report_days
        # The sweep's further steps, each called `(cursor, now)` in its last transaction:
        # work of other parts that bootstrap.build adds (the gateway's old bodies).
        self.sweep_steps: list[Callable] = []
        self.maintenance = maintenance

    def reconcile(self, batch: int = BATCH, max_batches: int = 10_000) -> Counter:
        """Move in-progress records whose lease ran out under `on_stale: reconcile` to
        needs_reconciliation, opening a stale_lease review.

        Leases held under `retry` are left alone: the next claim takes them over by itself,
        and until then the holder's token must keep working (docs/api.md: "until a newer
        attempt or a person's resolution replaces it"). Freeing them here (as v0.1 did)
        refused the holder's late completion with lease_lost and let the next claim do the
        effect a second time (issue 13, item 2)."""
        now, done = self.service.clock(), Counter()
        for _ in range(max_batches):
            with self.records.transaction() as cur:
                rows = self.maintenance.stale(cur, now, batch)
                expired: Counter = Counter()
                for seen in rows:
                    outcome = self._reconcile_one(cur, seen, now)
                    done[outcome] += 1
                    if outcome != "changed_meanwhile":
                        expired[seen.scope] += 1
                for scope in sorted(expired):  # counted with the batch, one row per scope
                    self.service.observer.lease_expired(scope, cur, expired[scope])
            if len(rows) < batch:
                break
        return done

    def _reconcile_one(self, cur, seen: Record, now: int) -> str:
        new = self.records.compare_and_set(seen, {"state": State.NEEDS_RECONCILIATION.value},
                                           cur)
        if new is None:
            return "changed_meanwhile"
        if new.state == State.NEEDS_RECONCILIATION.value:
            self.service.reviews.open_or_count(cur, new, domain.ReviewKind.STALE_LEASE, now,
                                               count=0)
        return new.state

    def sweep(self, batch: int = BATCH, max_batches: int = 100_000,
              progress: Optional[Callable[[int], None]] = None, pause_ratio: float = 1.0,
              sleep: Callable[[float], None] = time.sleep) -> int:
        """Purge expired records, `keep_finished` after expiry (records with an open review:
        `keep_unresolved`), one short transaction per batch, keeping what the daily report
        counted of them; then the report's counts older than `keep_report_days`. Returns how
        many records went.

        After each batch it pauses `pause_ratio` times as long as the batch took: back to
        back, the deletes starve the claims (SQLite's one write lock is taken again before a
        waiting claim's busy handler wakes up; PostgreSQL's WAL flushes queue behind them).
        Measured in bench/NOTES.md."""
        now, total = self.service.clock(), 0
        for _ in range(max_batches):
            started = time.monotonic()
            with self.records.transaction() as cur:
                gone = self._purge(cur, self.maintenance.doomed(
                    cur, now, now - self.keep_finished, now - self.keep_unresolved, batch), now)
            total += gone
            if progress:
                progress(total)
            if gone < batch:
                break
            if pause_ratio > 0:
                sleep((time.monotonic() - started) * pause_ratio)
        oldest = dt.date.fromisoformat(day_of(now)) - dt.timedelta(days=self.keep_report_days)
        with self.records.transaction() as cur:
            self.reports.forget_before(cur, oldest)
            self.maintenance.forget_kept(cur, now)
            for step in self.sweep_steps:  # e.g. the gateway's bodies kept past their time
                step(cur, now)
        traces = self.service.traces
        if traces is not None:  # traces past their own window, in batches like records
            for _ in range(max_batches):
                with self.records.transaction() as cur:
                    if traces.forget(cur, now - self.service.late_window, batch) < batch:
                        break
        return total

    def _purge(self, cur, ids: list[int], now: int) -> int:
        """Delete these records; their open reviews close as `purged` (kept for the audit),
        and what the daily report counted of them is kept in the same transaction."""
        if not ids:
            return 0
        self.reports.keep(cur, ids)
        if self.service.late_window:
            self.service.traces.keep(cur, ids)  # what a late repeat is recognised by
        return self.maintenance.purge(cur, ids, now)

    def try_lock(self, name: str, seconds: float, holder: Optional[str] = None) -> bool:
        """Hold the job lock `name` for `seconds` (renewable by its holder)."""
        now = self.service.clock()
        holder = holder or f"{socket.gethostname()}:{os.getpid()}"
        return self.maintenance.lock(name, holder, now, now + int(seconds * domain.SECOND))


class Timer:
    """Runs the reconciler and the sweeper every so often in one daemon thread per worker;
    the job lock lets only one worker of all instances do each run."""

    def __init__(self, jobs: Jobs, reconcile_every: float, sweep_every: float):
        self.jobs, self.every = jobs, {"reconcile": reconcile_every, "sweep": sweep_every}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="keystore-jobs", daemon=True)

    def start(self) -> Timer:
        if any(v > 0 for v in self.every.values()):
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        due = {name: 0.0 for name, every in self.every.items() if every > 0}
        tick = min(v for v in self.every.values() if v > 0)
        elapsed = 0.0
        while not self._stop.wait(tick):
            elapsed += tick
            for name, every in self.every.items():
                if every <= 0 or elapsed < due[name]:
                    continue
                due[name] = elapsed + every
                try:
                    if self.jobs.try_lock(name, every * 2):
                        result = getattr(self.jobs, name)()
                        if result:
                            log.info("%s: %s", name, dict(result) if isinstance(result, Counter)
                                     else f"{result} expired records purged")
                except Exception:  # a failed run is logged and retried at the next tick
                    log.exception("background %s failed", name)



