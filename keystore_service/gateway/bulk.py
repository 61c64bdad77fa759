"""Bulk actions over deliveries (docs/api.md, "Bulk actions"): a dry run that counts, and a
job over the set its filter matches when it starts, run in a thread of the process that
accepted it, one event at a time by the single-event operations (Deliveries.redeliver and
.retry, Operations.resolve's dismiss: their rules are written once, there), resumable.

A runner holds the job under a lease renewed with each event (LEASE_SECONDS); a cancel is
seen before the next event. If the runner's process dies, the job's lease runs out and the
watcher of any process (watch(), every WATCH_SECONDS, in `keystore serve`) takes it over and
goes on from the first event without an outcome. The one event a dead runner acted on but
had not written is acted on again: a redelivery of it then finds it queued (skipped), a
retry finds it due already, a dismiss finds no review (skipped) - except a forced redelivery
whose event was delivered meanwhile, which goes out once more under the same
Idempotency-Key (what a workflow's guard is for)."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Optional

from keystore_service import errors
from keystore_service.domain import records as domain
from keystore_service.domain.bulk import BulkAction, Filter, JobState
from keystore_service.domain.deliveries import DeliveryState
from keystore_service.domain.records import SECOND, Micros
from keystore_service.gateway.deliveries import Deliveries
from keystore_service.gateway.rules import scope_of
from keystore_service.service.operations import Operations
from keystore_service.storage.accounts import Principal
from keystore_service.storage.bulk import BulkStore, Item, Job

log = logging.getLogger("keystore.bulk")
LEASE_SECONDS = 30  # a runner renews it with each event; one event takes milliseconds
WATCH_SECONDS = 5.0  # how often a process looks for jobs whose runner's lease ran out
BATCH = 100  # events read per round trip
# What makes a single operation refuse an event: it is skipped, and the job goes on.
SKIPS = (errors.InProgress, errors.AlreadyCompleted, errors.BodyDropped, errors.NotFound,
         errors.Expired, errors.InvalidRequest)


def request_hash(action: str, f: dict, force: bool) -> str:
    """The request's fingerprint: the same key with another body is refused."""
    text = json.dumps({"action": action, "filter": f, "force": force}, sort_keys=True,
                      separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class Bulk:
    def __init__(self, store: BulkStore, deliveries: Deliveries, operations: Operations,
                 clock: Callable[[], Micros], holder: Optional[str] = None,
                 per_second: float = 0):
        """`per_second`: at most that many events a second per job (0: as fast as the
        database answers), so a large job leaves the database to live traffic."""
        self.store, self.deliveries, self.operations = store, deliveries, operations
        self.clock = clock
        self.pause = 1 / per_second if per_second > 0 else 0.0
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:bulk"[:64]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # --- requests ---------------------------------------------------------------------------

    def dry_run(self, tenant_id: int, f: Filter) -> int:
        return 0 if f.empty_range() else self.store.count(tenant_id, f)

    def start(self, who: Principal, action: str, f: Filter, shown: dict, force: bool,
              key: Optional[str], background: bool = True) -> tuple[Job, bool]:
        """A job of `action` over what `f` matches now (`shown`: the filter as the request
        gave it, kept with the job); with an idempotency key the tenant used already, that
        key's job and False (FingerprintMismatch when it was for another request)."""
        digest = request_hash(action, shown, force)
        now = self.clock()
        job, created = self.store.start({
            "tenant_id": who.tenant_id, "action": action,
            "filter": json.dumps(shown, sort_keys=True, separators=(",", ":")),
            "force": force, "state": JobState.RUNNING.value, "matched": 0, "done": 0,
            "skipped": 0, "started_at": now, "finished_at": None,
            "created_by": who.token_name, "idempotency_key": key, "request_hash": digest,
            "lease_holder": None, "lease_until": None, "last_error": None}, f)
        if not created and job.request_hash != digest:
            raise errors.FingerprintMismatch(
                "this Idempotency-Key was used for another bulk request (another action, "
                "filter or force); use a new key", details={"job": job.id})
        if created:
            log.info("bulk %s job %d by %r: %d events", action, job.id, who.token_name,
                     job.matched)  # %r: escaped
            if background:
                self._spawn(job)
        return job, created

    def get(self, tenant_id: int, job_id: int) -> Job:
        job = self.store.get(tenant_id, job_id)
        if job is None:
            raise errors.NotFound("no such job")
        return job

    def cancel(self, tenant_id: int, job_id: int) -> Job:
        """Stop a running job before its next event. A cancelled job answers as it is; a
        finished one (done, failed) is 409 already_completed."""
        job = self.get(tenant_id, job_id)
        if not self.store.cancel(tenant_id, job_id, self.clock()):
            job = self.get(tenant_id, job_id)
            if job.state != JobState.CANCELLED:
                raise errors.AlreadyCompleted(f"the job is {job.state}: nothing to cancel",
                                              details={"state": job.state})
        return self.get(tenant_id, job.id)

    # --- running ----------------------------------------------------------------------------

    def _spawn(self, job: Job) -> None:
        thread = threading.Thread(target=self.run, args=(job,), daemon=True,
                                  name=f"keystore-bulk-{job.id}")
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def run(self, job: Job, limit: Optional[int] = None) -> Optional[str]:
        """Run the job while this runner holds it: each event without an outcome, in order,
        until none is left (done), it is cancelled, or another runner holds it. `limit`
        stops after that many events (tests: a runner that stops). The job's state when
        this runner let go, None when it never held it."""
        job_id = job.id
        if not self.store.claim(job, self.holder, self.clock(), self._until()):
            return None
        job = self.store.get(job.tenant_id, job_id)  # as it is now that this runner holds it
        who = Principal(job.tenant_id, "", "operator", job.created_by)
        acted = 0
        try:
            while not self._stop.is_set():
                items = self.store.next_items(job, BATCH)
                if not items:
                    done = self.store.finish(job, self.holder, JobState.DONE.value,
                                             self.clock())
                    return JobState.DONE.value if done else self._state(job)
                for item in items:
                    if limit is not None and acted >= limit:
                        return JobState.RUNNING.value
                    state = self.store.settle(job, item.seq, self._act(job, who, item),
                                              self.holder, self._until())
                    acted += 1
                    if state != JobState.RUNNING.value:
                        return state or self._state(job)
                    if self.pause and self._stop.wait(self.pause):
                        return JobState.RUNNING.value  # stopping: the watcher goes on later
        except errors.Unavailable:  # the database went away: the lease runs out, and the
            log.warning("bulk job %d paused: the database is unavailable", job_id)
            return JobState.RUNNING.value  # watcher of some process goes on with it later
        except Exception as exc:  # a bug: the job says so instead of running forever
            log.exception("bulk job %d failed", job_id)
            self.store.finish(job, self.holder, JobState.FAILED.value, self.clock(),
                              type(exc).__name__)
            return JobState.FAILED.value
        return JobState.RUNNING.value

    def _act(self, job: Job, who: Principal, item: Item) -> str:
        """One event by its single operation: "done", or "skipped" when it refuses it (or
        the event is gone)."""
        if item.event_id is None:
            return "skipped"
        try:
            if job.action == BulkAction.REDELIVER:
                self.deliveries.redeliver(job.tenant_id, item.source, item.event_id,
                                          job.force, item.destination)
            elif job.action == BulkAction.RETRY:
                if not self.deliveries.retry(job.tenant_id, item.source, item.event_id,
                                             item.destination):
                    return "skipped"
            elif not self._dismiss(who, item):
                return "skipped"
        except SKIPS:
            return "skipped"
        return "done"

    def _dismiss(self, who: Principal, item: Item) -> bool:
        """A failed event's delivery_failed review closed as POST /v1/resolve's dismiss
        does (with its audit row); False when it is not failed or has no such review."""
        if item.state != DeliveryState.FAILED:
            return False
        detail = self.deliveries.detail(who.tenant_id, item.source, item.event_id,
                                        item.destination)
        review = next((r for r in detail.reviews
                       if r.kind == domain.ReviewKind.DELIVERY_FAILED.value
                       and r.destination in ("", detail.destination)), None)
        if review is None:
            return False
        self.operations.resolve(who, scope_of(item.source), item.event_id, "dismiss",
                                review.id)
        return True

    def _state(self, job: Job) -> Optional[str]:
        now = self.store.get(job.tenant_id, job.id)
        return now.state if now else None

    def _until(self) -> Micros:
        return self.clock() + LEASE_SECONDS * SECOND

    # --- the watcher --------------------------------------------------------------------------

    def resume_one(self) -> Optional[int]:
        """Take over one running job whose runner's lease ran out, and run it here (in this
        thread); its id, None when there was none."""
        job = self.store.orphan(self.clock())
        if job is None:
            return None
        log.info("bulk job %d: its runner stopped; going on with it", job.id)
        self.run(job)
        return job.id

    def watch(self, every: float = WATCH_SECONDS) -> threading.Thread:
        """A daemon thread that resumes orphaned jobs every `every` seconds."""
        def loop() -> None:
            while not self._stop.wait(every):
                try:
                    while self.resume_one() is not None and not self._stop.is_set():
                        pass
                except Exception:  # noqa: BLE001 - logged; the next round tries again
                    log.exception("bulk watcher")
        thread = threading.Thread(target=loop, daemon=True, name="keystore-bulk-watch")
        thread.start()
        return thread

    def stop(self, wait: float = 5.0) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(wait)
