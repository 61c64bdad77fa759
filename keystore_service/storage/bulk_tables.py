"""The bulk actions' tables (issue 27, "Bulk actions"; migration 0013): a job, and the events
it acts on, fixed when it starts. On the same `metadata` as tables.py, which imports this
module at its end so that every table is known there.

The set is a list of event ids written with the job in one transaction (INSERT ... SELECT),
not "ids up to a bound that match the filter": ids are handed out before commit, so an event
with a smaller id may commit after the job started (it would be in a bound's set), and the
filter's state and last error change while the job runs (a re-read filter would take in
events that did not match at the start, or lose some that did)."""
from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from keystore_service.domain.bulk import ACTIONS, ITEM_OUTCOMES, JOB_STATES
from keystore_service.storage.tables import Id, exact_text, metadata, one_of


bulk_jobs = Table(
    "bulk_jobs", metadata,
    Column("id", Id, primary_key=True),
    Column("tenant_id", Integer, ForeignKey("tenants.id"), nullable=False),
    Column("action", String(16), nullable=False),
    Column("filter", Text, nullable=False),  # the request's filter, canonical JSON
    Column("force", Boolean, nullable=False),
    Column("state", String(12), nullable=False),
    Column("matched", Integer, nullable=False),
    Column("done", Integer, nullable=False),
    Column("skipped", Integer, nullable=False),
    Column("started_at", BigInteger, nullable=False),
    Column("finished_at", BigInteger, nullable=True),
    Column("created_by", Text, nullable=False),  # the token's name, for the audit rows
    # The request's Idempotency-Key (null: none) and its body's fingerprint: a repeat of the
    # key answers this job, a different body under it is refused (422).
    Column("idempotency_key", exact_text(255), nullable=True),
    Column("request_hash", String(80), nullable=False),
    # The runner working on it: a lease renewed with each event; a job whose lease ran out
    # while running is taken over by any process's watcher (gateway/bulk.py).
    Column("lease_holder", String(64), nullable=True),
    Column("lease_until", BigInteger, nullable=True),
    Column("last_error", Text, nullable=True),  # why a job failed
    UniqueConstraint("tenant_id", "idempotency_key"),  # NULLs never collide
    CheckConstraint(one_of("action", ACTIONS), name="action"),
    CheckConstraint(one_of("state", JOB_STATES), name="state"),
    CheckConstraint("done + skipped <= matched", name="progress"),
    Index(None, "state", "lease_until"),  # the watcher's running jobs
    Index(None, "tenant_id", "started_at"),
)

bulk_job_items = Table(
    "bulk_job_items", metadata,
    Column("job_id", Id, ForeignKey("bulk_jobs.id", ondelete="CASCADE"), nullable=False),
    Column("tenant_id", Integer, ForeignKey("tenants.id"), nullable=False),  # the job's
    Column("seq", Integer, nullable=False),  # 1, 2, ... in the order the job acts
    # No foreign key: an event purged with its record while the job runs is skipped.
    Column("event_pk", Id, nullable=False),
    Column("outcome", String(8), nullable=True),  # null until acted on
    PrimaryKeyConstraint("job_id", "seq"),
    CheckConstraint("outcome IS NULL OR " + one_of("outcome", ITEM_OUTCOMES),
                    name="outcome"),
)
