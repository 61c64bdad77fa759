"""The reconciler's settlement pass (issue 28): plain claims (no send) in scopes with a
settlement (PUT /v1/scopes/<scope>/settlement) whose lease ran out under `on_stale:
reconcile` wait in needs_reconciliation with a stale_lease review; before a person takes
one, the scope's check asks the destination whether the effect happened.

  found   -> the record succeeded with the resource id, the review resolved settled_by_check
  absent  -> on_absent release: the record released, the review resolved released_by_check;
             on_absent review: the review stays, the check's answer attached
  unclear -> asked again after CHECK_BACKOFF_SECONDS, then twice as long; after CHECK_TRIES
             runs the review stays, the answers attached

It runs beside the relay (Gateway.start_relay), in bounded batches. Safe with several
processes: the job lock `settle` (renewed before each check, for the check's timeout) lets
one process ask at a time, and every change is a compare-and-set, so at worst a check runs
twice (a lock taken over from a process that stalled) and a record is never settled twice.
The HTTP request is made outside any transaction; its verdict is applied in one."""
from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any, Optional

from keystore_service.domain.records import SECOND, Micros
from keystore_service.domain.sends import CHECK_TRIES, OnAbsent, Verdict
from keystore_service.gateway.settlement import Checker, CheckRun, Settlement
from keystore_service.storage.record_checks import Due, RecordCheckStore

log = logging.getLogger("keystore.settlement")
BATCH = 20  # records asked about per pass: at most 20 check timeouts (60 s each) per pass
CHECK_BACKOFF_SECONDS = 30  # an unclear check is asked again after 30 s, then 60 s
LOCK = "settle"
LOCK_MARGIN_SECONDS = 30  # the lock outlives one check's whole request by this much
EVERY_SECONDS = 5.0  # the loop's pace: a stale lease is reconciled every 30 s by default


def due_again(d: Due, now: Micros) -> bool:
    """Whether the record's next try is due: at once for the first, then after the backoff
    (CHECK_BACKOFF_SECONDS * 2^(tries - 1)) from the last run."""
    if d.tries == 0 or d.last_at is None:
        return True
    return now >= d.last_at + CHECK_BACKOFF_SECONDS * 2 ** (d.tries - 1) * SECOND


class SettlementPass:
    def __init__(self, checker: Checker, settlement: Settlement, checks: RecordCheckStore,
                 connection_by_id: Callable[[int], Any], clock: Callable[[], Micros],
                 lock: Optional[Callable[[str, float], bool]] = None):
        self.checker, self.settlement, self.checks = checker, settlement, checks
        self.connection_by_id, self.clock, self.lock = connection_by_id, clock, lock
        self.transaction = settlement.records.transaction

    def run(self, batch: int = BATCH) -> Counter:
        """One pass: what became of each record asked about (found, released, absent_review,
        unclear, unresolved, changed_meanwhile, no_connection)."""
        done: Counter = Counter()
        with self.transaction() as cur:
            due = self.checks.due(cur, self.clock(), batch)
        for d in due:
            if not due_again(d, self.clock()):
                continue
            connection = self.connection_by_id(d.connection_id)
            if connection is None:  # deleted meanwhile (its settlements went with it)
                done["no_connection"] += 1
                continue
            if self.lock is not None and not self.lock(
                    LOCK, connection.timeout_seconds + LOCK_MARGIN_SECONDS):
                break  # another process asks now
            try:
                done[self._one(d, connection)] += 1
            except Exception:  # one record's trouble must not stop the others
                log.exception("settlement check of record %s failed", d.record.id)
        return done

    def _one(self, d: Due, connection: Any) -> str:
        check = json.loads(d.check_spec)
        run = self.checker.run(connection, check, d.record.scope, d.record.key)
        now = self.clock()
        with self.transaction() as cur:
            self.settlement.record_check(cur, d.record, run, now)
            return self._apply(cur, d, run, now)

    def _apply(self, cur: Any, d: Due, run: CheckRun, now: Micros) -> str:
        if run.verdict is Verdict.FOUND:
            new = self.settlement.settle_found(cur, d.record, run, now)
            return "found" if new is not None else "changed_meanwhile"
        if run.verdict is Verdict.ABSENT:
            if d.on_absent == OnAbsent.RELEASE.value:
                new = self.settlement.release_absent(cur, d.record, run, now)
                return "released" if new is not None else "changed_meanwhile"
            self.settlement.keep_answers(cur, d.record, d.review_id)
            return "absent_review"
        if d.tries + 1 < CHECK_TRIES:
            return "unclear"
        self.settlement.keep_answers(cur, d.record, d.review_id)
        return "unresolved"


class SettlementLoop:
    """One daemon thread per process, beside the relay: a pass every EVERY_SECONDS."""

    def __init__(self, settlement_pass: SettlementPass, alive: Callable[[], bool],
                 every: float = EVERY_SECONDS):
        self.settlement_pass, self.alive, self.every = settlement_pass, alive, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="keystore-settlement",
                                        daemon=True)

    def start(self) -> SettlementLoop:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.every) and self.alive():
            try:
                done = self.settlement_pass.run()
                if done:
                    log.info("settlement: %s", dict(done))
            except Exception:  # the database away: logged, tried at the next tick
                log.exception("settlement pass failed")
