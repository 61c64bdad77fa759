"""Repeats counted after the answer (KEYSTORE_ASYNC_REPEAT_COUNTS): a replay costs a read.

A claim answered `replay` or `in_progress` changes nothing but the record's `duplicate_count`
and `last_seen_at`. Counted in the claim's own statement, that is a write and a commit for
every repeat; counted here, the repeat is answered from a read, and the counts of a worker
are added up in memory and written in one statement within a second (and when the worker
stops). The answer already shows its own count. What it costs: another worker's lookup sees
the count up to a second late, and a worker killed with SIGKILL loses the counts of its last
second (docs/api.md, "Repeats counted later"). Nothing else depends on the counts: no rule of
docs/api.md reads them.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace

from keystore_service import errors
from keystore_service.domain.records import Micros, Record

log = logging.getLogger("keystore.counting")
INTERVAL = 1.0  # seconds between writes of the counts
# Records with counts waiting while the database is away: beyond this, the counts of new
# records are dropped (and logged) rather than held without bound.
MAX_PENDING = 100_000
# Records per statement: a statement holds its rows' locks until it commits, and a claim of
# one of them waits that long.
CHUNK = 200


class RepeatCounts:
    """Counts per (record id, incarnation): (repeats, last seen), written by `write` as one
    statement. A count for an incarnation that has been replaced since is dropped by the
    statement (it matches no row), as a repeat counted in its claim would not have reached
    the new incarnation either."""

    def __init__(self, write: Callable[[list[tuple[int, int, int, Micros]]], None],
                 interval: float = INTERVAL):
        self._write, self.interval = write, interval
        self._lock = threading.Lock()
        self._pending: dict[tuple[int, int], list] = {}
        self._wake = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self.dropped = 0

    def add(self, record: Record, now: Micros) -> Record:
        """Count one repeat of `record`; the record as the answer shows it (with the counts
        of this process not yet written)."""
        with self._lock:
            entry = self._pending.get((record.id, record.incarnation))
            if entry is None:
                if len(self._pending) >= MAX_PENDING:
                    self.dropped += 1
                    return replace(record, duplicate_count=record.duplicate_count + 1,
                                   last_seen_at=max(record.last_seen_at, now))
                entry = self._pending[(record.id, record.incarnation)] = [0, now]
            entry[0] += 1
            entry[1] = max(entry[1], now)
            waiting = entry[0]
            if self._thread is None and not self._stopped:
                self._thread = threading.Thread(target=self._run, name="repeat-counts",
                                                daemon=True)
                self._thread.start()
        return replace(record, duplicate_count=record.duplicate_count + waiting,
                       last_seen_at=max(record.last_seen_at, now))

    def flush(self) -> int:
        """Write what is pending now; returns how many records' counts were written. On an
        outage the counts stay pending for the next write."""
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return 0
        rows = sorted((rid, inc, n, last) for (rid, inc), (n, last) in pending.items())
        try:
            for i in range(0, len(rows), CHUNK):  # short row locks, taken in id order
                self._write(rows[i:i + CHUNK])
                for row in rows[i:i + CHUNK]:  # written: not kept for the next write
                    del pending[row[:2]]
        except errors.Unavailable:
            with self._lock:
                for key, (n, last) in pending.items():
                    entry = self._pending.get(key)
                    if entry is None and len(self._pending) < MAX_PENDING:
                        self._pending[key] = [n, last]
                    elif entry is not None:
                        entry[0] += n
                        entry[1] = max(entry[1], last)
                    else:
                        self.dropped += n
            return 0
        return len(rows)

    def close(self) -> None:
        """Stop the writer and write what is pending (at a worker's exit)."""
        self._stopped = True
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)
        self.flush()

    def _run(self) -> None:
        while not self._stopped:
            self._wake.wait(self.interval)
            if self._stopped:
                return
            self._wake.clear()
            try:
                self.flush()
            except Exception as exc:  # noqa: BLE001 - the writer outlives any one failure
                log.error("writing repeat counts failed (%s); those counts are lost",
                          type(exc).__name__)
