"""The schema, in SQLAlchemy Core. The database enforces the rules the code relies on.

Instants are BIGINT microseconds since the Unix epoch, UTC: exact comparisons at the expiry
instant on both backends, and no timezone conversion anywhere. Key columns use PostgreSQL's
"C" collation (SQLite's default is BINARY already), so keys compare byte for byte everywhere.
Alembic migrations in `migrations/versions/` create these tables; tests check they agree.
"""
from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects import postgresql

from keystore_service.domain.deliveries import DeliveryState

metadata = MetaData(naming_convention={
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
})

# SQLite makes only an INTEGER PRIMARY KEY an alias of the rowid (autoincrementing).
Id = BigInteger().with_variant(Integer(), "sqlite")


def one_of(column: str, values: tuple[str, ...]) -> str:
    """A CHECK's text: `column` holds one of `values` (the domain's enum values)."""
    return f"{column} IN (" + ", ".join(f"'{v}'" for v in values) + ")"


def exact_text(length: int | None = None):
    """A text column that compares bytes exactly on every backend."""
    base = String(length) if length else Text()
    return base.with_variant(postgresql.VARCHAR(length, collation="C") if length
                             else postgresql.TEXT(collation="C"), "postgresql")


tenants = Table(
    "tenants", metadata,
    Column("id", Integer, primary_key=True),
    Column("name", exact_text(64), nullable=False, unique=True),
    Column("created_at", BigInteger, nullable=False),
    CheckConstraint("length(name) BETWEEN 1 AND 64", name="name_length"),
)

tokens = Table(
    "tokens", metadata,
    Column("id", Integer, primary_key=True),
    Column("tenant_id", Integer, ForeignKey("tenants.id"), nullable=False),
    Column("name", exact_text(128), nullable=False),
    Column("role", String(16), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),  # SHA-256 hex, never the token
    Column("created_at", BigInteger, nullable=False),
    Column("revoked_at", BigInteger, nullable=True),
    UniqueConstraint("tenant_id", "name"),
    CheckConstraint("role IN ('client', 'operator')", name="role"),
    CheckConstraint("length(name) BETWEEN 1 AND 128", name="name_length"),
)

STATES = "('in_progress', 'succeeded', 'failed', 'released', 'needs_reconciliation')"

# Column order is domain.Record's field order: a returned row maps to a Record positionally.
records = Table(
    "records", metadata,
    Column("id", Id, primary_key=True),
    Column("tenant_id", Integer, ForeignKey("tenants.id"), nullable=False),
    Column("scope", exact_text(128), nullable=False),
    Column("key", exact_text(), nullable=False),
    Column("state", String(24), nullable=False),
    Column("fingerprint", exact_text(256), nullable=True),
    Column("attempt", Integer, nullable=False),
    Column("incarnation", Integer, nullable=False),
    Column("lease_token_hash", String(64), nullable=True),
    Column("lease_acquired_at", BigInteger, nullable=True),
    Column("lease_expires_at", BigInteger, nullable=True),
    Column("on_stale", String(16), nullable=False),
    Column("first_seen_at", BigInteger, nullable=False),
    Column("last_seen_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    Column("duplicate_count", BigInteger, nullable=False),
    Column("checkpoint_step", Text, nullable=True),
    Column("checkpoint_resource_id", Text, nullable=True),
    Column("checkpoint_at", BigInteger, nullable=True),
    Column("result", Text, nullable=True),
    Column("version_kind", String(8), nullable=True),
    Column("version", BigInteger, nullable=True),
    Column("review_id", Id, nullable=True),  # the oldest open review, if any (no FK: a cache)
    Column("result_resource_id", Text, nullable=True),  # for the report's shared-id check
    UniqueConstraint("tenant_id", "scope", "key"),
    CheckConstraint("length(scope) BETWEEN 1 AND 128", name="scope_length"),
    CheckConstraint("length(key) BETWEEN 1 AND 512", name="key_length"),
    CheckConstraint("fingerprint IS NULL OR length(fingerprint) BETWEEN 1 AND 256",
                    name="fingerprint_length"),
    CheckConstraint(f"state IN {STATES}", name="state"),
    CheckConstraint("on_stale IN ('reconcile', 'retry')", name="on_stale"),
    CheckConstraint("attempt >= 1 AND incarnation >= 1 AND duplicate_count >= 0",
                    name="counters"),
    CheckConstraint("state <> 'in_progress' OR lease_expires_at IS NOT NULL",
                    name="lease_when_in_progress"),
    CheckConstraint("(version_kind IS NULL AND version IS NULL) OR "
                    "(version_kind IN ('int', 'time') AND version IS NOT NULL)", name="version"),
)

Index("ix_records_expires_at", records.c.expires_at)
Index("ix_records_stale_leases", records.c.lease_expires_at,
      postgresql_where=text("state = 'in_progress'"), sqlite_where=text("state = 'in_progress'"))
Index("ix_records_resource", records.c.tenant_id, records.c.scope, records.c.result_resource_id,
      postgresql_where=text("result_resource_id IS NOT NULL"),
      sqlite_where=text("result_resource_id IS NOT NULL"))

# Ended attempts; the running attempt lives on its record (attempt, lease_acquired_at).
attempts = Table(
    "attempts", metadata,
    Column("id", Id, primary_key=True),
    Column("record_id", Id, ForeignKey("records.id", ondelete="CASCADE"), nullable=False),
    Column("incarnation", Integer, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("acquired_at", BigInteger, nullable=False),
    Column("ended_at", BigInteger, nullable=False),
    Column("ending", String(24), nullable=False),
    Column("reason", Text, nullable=True),
    CheckConstraint("ending IN ('succeeded', 'failed', 'released', 'taken_over', 'resolved')",
                    name="ending"),
    Index(None, "record_id", "incarnation", "attempt"),
)

REVIEW_KINDS = ("('fingerprint_mismatch', 'stale_lease', 'delivery_failed', 'late_repeat', "
                "'send_unknown')")

# What needs a person: one open review per (record, kind, destination); refused claims count
# on it. `destination`: a delivery_failed review's destination (0024), '' for the others.
reviews = Table(
    "reviews", metadata,
    Column("id", Id, primary_key=True),
    Column("tenant_id", Integer, ForeignKey("tenants.id"), nullable=False),
    Column("record_id", Id, ForeignKey("records.id", ondelete="SET NULL"), nullable=True),
    Column("scope", exact_text(128), nullable=False),
    Column("key", exact_text(), nullable=False),
    Column("incarnation", Integer, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("kind", String(24), nullable=False),
    Column("state", String(12), nullable=False),
    Column("opened_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Column("count", BigInteger, nullable=False),
    Column("original_fingerprint", Text, nullable=True),
    Column("refused_fingerprints", Text, nullable=True),  # JSON list, the newest 10 distinct
    Column("resolution", String(24), nullable=True),
    Column("resolved_at", BigInteger, nullable=True),
    Column("resolved_by", Text, nullable=True),
    # What a person compares: a refused body kept with its review (JSON, at most 64 KiB of
    # body; the gateway's held webhooks, and kept claim payloads), removed when it closes.
    Column("kept", Text, nullable=True),
    Column("destination", String(64), nullable=False, server_default=""),
    CheckConstraint(f"kind IN {REVIEW_KINDS}", name="kind"),
    CheckConstraint("state IN ('open', 'resolved')", name="state"),
    CheckConstraint("(state = 'open') = (resolution IS NULL)", name="resolution"),
    Index("uq_reviews_open", "record_id", "kind", "destination", unique=True,
          postgresql_where=text("state = 'open'"), sqlite_where=text("state = 'open'")),
    Index(None, "tenant_id", "state", "opened_at"),
)

# The audit trail of every resolution: who, when, what, and the record before and after.
resolutions = Table(
    "resolutions", metadata,
    Column("id", Id, primary_key=True),
    Column("tenant_id", Integer, ForeignKey("tenants.id"), nullable=False),
    Column("record_id", Id, nullable=True),
    Column("review_id", Id, nullable=True),
    Column("scope", exact_text(128), nullable=False),
    Column("key", exact_text(), nullable=False),
    Column("action", String(24), nullable=False),
    Column("actor", Text, nullable=False),
    Column("at", BigInteger, nullable=False),
    Column("before", Text, nullable=True),
    Column("after", Text, nullable=True),
    Index(None, "tenant_id", "scope", "key"),
)

# Background jobs (reconciler, sweeper) run in one worker at a time across all instances.
job_locks = Table(
    "job_locks", metadata,
    Column("name", String(64), primary_key=True),
    Column("holder", Text, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
)

# Service-wide secrets shared by every worker and instance (the web page's session key).
service_secrets = Table(
    "service_secrets", metadata,
    Column("name", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

# The sealing keys' check value (issue 25): one row, a fixed text sealed with the key that
# seals sources' secrets, so that a process with other keys sees it cannot open it before
# it seals anything (service/sealing.py). Never a secret itself.
sealing_check = Table(
    "sealing_check", metadata,
    Column("id", Integer, primary_key=True),
    Column("value", Text, nullable=False),
    Column("sealed_at", BigInteger, nullable=False),
    CheckConstraint("id = 1", name="one_row"),
)

# Per-token request counts of the current window, when rate limits are on (one row a token).
rate_limits = Table(
    "rate_limits", metadata,
    Column("token_id", Integer, primary_key=True),
    Column("window_start", BigInteger, nullable=False),
    Column("count", BigInteger, nullable=False),
)

# The operators' page's sessions, one row per sign-in. The signed cookie names its row by a
# random id (stored as SHA-256 hex, as tokens are); signing out deletes the row, so a copy of
# the cookie stops working at once on every worker and instance.
ui_sessions = Table(
    "ui_sessions", metadata,
    Column("id_hash", String(64), primary_key=True),
    Column("tenant_id", Integer, ForeignKey("tenants.id"), nullable=False),
    Column("token_name", exact_text(128), nullable=False),
    Column("signed_in_at", BigInteger, nullable=False),
    Index(None, "signed_in_at"),
)

# What the daily report counted of records the sweeper purged, per tenant, scope and UTC day
# ("YYYY-MM-DD"): the sweeper adds a record's figures here in the transaction that deletes it,
# so a day's report stays as it was (kept KEYSTORE_KEEP_REPORT_DAYS, then purged too).
REPORT_COUNTS = ("claimed", "succeeded", "failed", "released", "taken_over", "resolved",
                 "duplicates_suppressed")
report_counts = Table(
    "report_counts", metadata,
    Column("tenant_id", Integer, ForeignKey("tenants.id"), primary_key=True),
    Column("scope", exact_text(128), primary_key=True),
    Column("day", String(10), primary_key=True),
    *[Column(name, BigInteger, nullable=False) for name in REPORT_COUNTS],
    CheckConstraint(" AND ".join(f"{name} >= 0" for name in REPORT_COUNTS), name="counts"),
    Index(None, "day"),
)

# keystore_lease_expiries_total, kept in the database: a lease found run out by a claim, by
# the service's reconciler or by `keystore reconcile` from cron counts here, in the
# transaction that handles it; /metrics reads it at scrape time. `id` orders the scopes for
# the label cap (the first ones keep their own label for good).
lease_expiries = Table(
    "lease_expiries", metadata,
    Column("id", Integer, primary_key=True),
    Column("scope", exact_text(128), nullable=False, unique=True),
    Column("count", BigInteger, nullable=False),
    CheckConstraint("count >= 0", name="count"),
)


# --- the inbound webhook gateway (gateway/) -------------------------------------------------

# A source: one provider account and workflow. Every secret it holds (signing secrets, the
# destination's headers and secret, the ingest id itself) is in `sealed`, encrypted with a
# key from the environment (KEYSTORE_SECRET_KEY): a database dump alone reveals none of them.
# The ingest id is found by its SHA-256, as tokens are. The provider is checked by the API
# against the provider modules (no CHECK: adding a provider is one module, no migration).
hook_sources = Table(
    "hook_sources", metadata,
    Column("id", Integer, primary_key=True),
    Column("tenant_id", Integer, ForeignKey("tenants.id"), nullable=False),
    Column("name", exact_text(64), nullable=False),
    Column("provider", String(32), nullable=False),
    Column("ingest_hash", String(64), nullable=False, unique=True),
    Column("sealed", Text, nullable=False),
    Column("config", Text, nullable=False),  # JSON: the provider options (no secret)
    Column("ttl_seconds", BigInteger, nullable=False),
    Column("retry_window_seconds", BigInteger, nullable=False),
    Column("keep_body_seconds", BigInteger, nullable=False),
    Column("state", String(12), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    # A Retry-After pause lasts at most this long (docs/webhooks/README.md: an hour by default, a
    # day: long enough for any provider's announced maintenance, short enough that a typo
    # or a hostile answer cannot stop a source for years).
    Column("max_pause_seconds", Integer, nullable=False, server_default="3600"),
    # 0012: failing this long opens delivery_failing, an oldest queued this old backlog
    Column("alert_after_seconds", Integer, nullable=False, server_default="300"),
    Column("backlog_alert_seconds", Integer, nullable=False, server_default="900"),
    # The destination, its limits and where its forwarding is: hook_destinations (0020).
    UniqueConstraint("tenant_id", "name"),
    CheckConstraint("state IN ('active', 'disabled')", name="state"),
    CheckConstraint("length(name) BETWEEN 1 AND 64", name="name_length"),
    CheckConstraint("ttl_seconds >= 1 AND retry_window_seconds >= 1", name="limits"),
    CheckConstraint("max_pause_seconds BETWEEN 1 AND 86400", name="pause_limit"),
    CheckConstraint("alert_after_seconds BETWEEN 0 AND 86400", name="alert_after"),
    CheckConstraint("backlog_alert_seconds BETWEEN 0 AND 604800", name="backlog_alert"),
)

# One accepted event per record (scope `hook:<source>`, key = the event id): its body and
# headers as they came, and where its forwarding is. The row goes with its record.
hook_events = Table(
    "hook_events", metadata,
    Column("id", Id, primary_key=True),
    Column("tenant_id", Integer, ForeignKey("tenants.id"), nullable=False),
    Column("source_id", Integer, ForeignKey("hook_sources.id"), nullable=False),
    Column("record_id", Id, ForeignKey("records.id", ondelete="CASCADE"), nullable=False),
    Column("event_id", exact_text(), nullable=False),
    Column("state", String(12), nullable=False),
    Column("body", LargeBinary, nullable=True),  # None once dropped (keep_body_seconds)
    Column("headers", Text, nullable=False),  # JSON [[name, value], ...] of the provider
    Column("received_at", BigInteger, nullable=False),
    Column("window_start", BigInteger, nullable=False),  # acceptance; a redelivery restarts
    Column("next_attempt_at", BigInteger, nullable=True),
    Column("attempts", Integer, nullable=False),  # Keystore-Attempt of the latest forward
    Column("lease_holder", String(64), nullable=True),
    Column("lease_until", BigInteger, nullable=True),
    Column("delivered_at", BigInteger, nullable=True),
    Column("body_dropped_at", BigInteger, nullable=True),
    Column("event_type", exact_text(128), nullable=True),  # the provider's type, or null
    # An ordered destination's key of the event (0018: routing.ordering_key's digest), or
    # null, and the mode it was accepted under (0019: OrderingMode's value; storage/take.py).
    Column("ordering_key", String(71), nullable=True),
    Column("ordering_mode", String(10), nullable=True),
    # The source's destination it goes to (0021): the take, the rate, a pause and the order
    # per key are the destination's.
    Column("destination_id", Integer, ForeignKey("hook_destinations.id"), nullable=False),
    # The same text as migration 0007's: the stored strings of domain/deliveries.py.
    CheckConstraint("state IN (" + ", ".join(f"'{s.value}'" for s in DeliveryState) + ")",
                    name="state"),
    CheckConstraint(f"state <> '{DeliveryState.DELIVERING.value}' OR lease_until IS NOT NULL",
                    name="lease"),
    # 0023: one delivery per (record, destination); a record's deliveries (its settle)
    UniqueConstraint("record_id", "destination_id"),
    Index(None, "destination_id", "state", "next_attempt_at"),  # a destination's due (take)
    Index(None, "source_id", "state", "received_at"),  # a source's oldest queued (0011)
    Index(None, "tenant_id", "received_at"),
    Index(None, "source_id", "event_type", "received_at"),  # filters by type (0013)
    # 0018: a serial key's other unsettled events (take), and the keyed events to park (due
    # but held) or to let go (parked: next_attempt_at null); only the events with a key
    *(Index(name, *columns, postgresql_where=text(where), sqlite_where=text(where))
      for name, columns, where in (
          ("ix_hook_events_serial", ("destination_id", "ordering_key", "state", "id"),
           "ordering_key IS NOT NULL"),
          ("ix_hook_events_keyed", ("next_attempt_at", "id"),
           f"ordering_key IS NOT NULL AND state = '{DeliveryState.QUEUED.value}'"))),
)

# Every forward of an event: when, how long, and what came back (a status or an error class,
# and up to 4 KiB of the answer).
hook_attempts = Table(
    "hook_attempts", metadata,
    Column("id", Id, primary_key=True),
    Column("event_pk", Id, ForeignKey("hook_events.id", ondelete="CASCADE"), nullable=False),
    Column("number", Integer, nullable=False),
    Column("at", BigInteger, nullable=False),
    Column("duration_ms", Integer, nullable=False),
    Column("status_code", Integer, nullable=True),
    Column("error", Text, nullable=True),
    Column("answer", Text, nullable=True),
    Index(None, "event_pk"),
)

# The tables of other modules on this metadata; claims v1.1's late repeats and kept
# payloads (late_tables.py) stay importable from here, as before.
from keystore_service.storage import alert_tables, bulk_tables, route_tables, send_tables  # noqa: E402,F401 (their tables)
from keystore_service.storage.late_tables import kept_payloads, late_repeats, late_traces  # noqa: E402,F401
