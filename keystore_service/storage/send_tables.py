"""The outbound sends' tables (issue 28, "Outbound: connections, sends once, settlement by
asking the destination"; migration 0014). On the same `metadata` as tables.py, which imports
this module at its end so that every table is known there."""
from __future__ import annotations

from sqlalchemy import (
    BigInteger,
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

from keystore_service.domain.sends import (
    CHECK_VERDICTS,
    CLASSES,
    ON_ABSENT,
    SEND_STATES,
)
from keystore_service.storage.tables import Id, exact_text, metadata, one_of


# A named downstream API of a tenant. `sealed` holds its headers (JSON, sealed as sources'
# secrets are: write-only, never returned or logged); `header_names` is what the API may show
# of them. `rate` and `check` are JSON (null: none).
connections = Table(
    "connections", metadata,
    Column("id", Integer, primary_key=True),
    Column("tenant_id", Integer, ForeignKey("tenants.id"), nullable=False),
    Column("name", exact_text(64), nullable=False),
    Column("base_url", Text, nullable=False),
    Column("sealed", Text, nullable=False),
    Column("header_names", Text, nullable=False),  # JSON list of names, as given
    Column("idempotency_header", String(64), nullable=True),
    Column("timeout_seconds", Integer, nullable=False),
    Column("retry_window_seconds", Integer, nullable=False),
    Column("max_in_flight", Integer, nullable=False),
    Column("rate", Text, nullable=True),
    Column("check_spec", Text, nullable=True),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    UniqueConstraint("tenant_id", "name"),
    CheckConstraint("length(name) BETWEEN 1 AND 64", name="name_length"),
    CheckConstraint("timeout_seconds BETWEEN 1 AND 60", name="timeout"),
    CheckConstraint("retry_window_seconds >= 10", name="window"),
    CheckConstraint("max_in_flight BETWEEN 1 AND 256", name="in_flight"),
)

# One send of a record's incarnation: its request, sealed until it settles (`sealed` null
# after), made by the sender under a lease and retried with the same key. `reference` is
# `<scope>:<key>`, the idempotency header's value before encoding.
sends = Table(
    "sends", metadata,
    Column("id", Id, primary_key=True),
    Column("tenant_id", Integer, ForeignKey("tenants.id"), nullable=False),
    Column("connection_id", Integer, ForeignKey("connections.id", ondelete="SET NULL"),
           nullable=True),
    Column("connection_name", exact_text(64), nullable=False),
    Column("record_id", Id, ForeignKey("records.id", ondelete="CASCADE"), nullable=False),
    Column("incarnation", Integer, nullable=False),
    Column("reference", exact_text(), nullable=False),
    Column("method", String(8), nullable=False),
    Column("path", Text, nullable=False),
    Column("resource_id_pointer", Text, nullable=True),
    Column("sealed", Text, nullable=True),
    Column("state", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("unknown", Integer, nullable=False),  # 1 once an attempt's outcome was unknown
    Column("check_tries", Integer, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("window_end", BigInteger, nullable=False),
    Column("next_attempt_at", BigInteger, nullable=False),
    Column("lease_holder", String(64), nullable=True),
    Column("lease_until", BigInteger, nullable=True),
    Column("settled_at", BigInteger, nullable=True),
    Column("last_error", Text, nullable=True),
    UniqueConstraint("record_id", "incarnation"),
    CheckConstraint(one_of("state", SEND_STATES), name="state"),
    CheckConstraint("unknown IN (0, 1)", name="unknown"),
    Index(None, "state", "next_attempt_at"),  # the sender's due sends
    Index(None, "connection_id", "state"),  # a connection's in flight and queue
    Index(None, "tenant_id", "created_at"),
)

# Each request a send made: what it came to (`class`: domain.sends.CLASSES) and up to 512
# characters of the answer, for the record's trail.
send_attempts = Table(
    "send_attempts", metadata,
    Column("id", Id, primary_key=True),
    Column("send_id", Id, ForeignKey("sends.id", ondelete="CASCADE"), nullable=False),
    Column("at", BigInteger, nullable=False),
    Column("duration_ms", Integer, nullable=False),
    Column("status_code", Integer, nullable=True),
    Column("error", Text, nullable=True),
    Column("class", String(12), nullable=False),
    Column("answer", Text, nullable=True),
    CheckConstraint(one_of("class", CLASSES), name="class"),
    Index(None, "send_id", "at"),
)

# A check's run against a record (a send's, or a claim's in a scope with a settlement): what
# the destination answered and what it was taken to mean, for the trail, the review and the
# page. `answer` is at most 1 KiB.
record_checks = Table(
    "record_checks", metadata,
    Column("id", Id, primary_key=True),
    Column("tenant_id", Integer, ForeignKey("tenants.id"), nullable=False),
    Column("record_id", Id, ForeignKey("records.id", ondelete="CASCADE"), nullable=False),
    Column("incarnation", Integer, nullable=False),
    Column("at", BigInteger, nullable=False),
    Column("status_code", Integer, nullable=True),
    Column("error", Text, nullable=True),
    Column("verdict", String(8), nullable=False),
    Column("resource_id", Text, nullable=True),
    Column("answer", Text, nullable=True),
    CheckConstraint(one_of("verdict", CHECK_VERDICTS), name="verdict"),
    Index(None, "record_id", "at"),
)

# A scope's check for its ordinary claims (PUT /v1/scopes/<scope>/settlement).
scope_settlements = Table(
    "scope_settlements", metadata,
    Column("tenant_id", Integer, ForeignKey("tenants.id"), nullable=False),
    Column("scope", exact_text(128), nullable=False),
    Column("connection_id", Integer, ForeignKey("connections.id", ondelete="CASCADE"),
           nullable=False),
    Column("check_spec", Text, nullable=False),
    Column("on_absent", String(8), nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    PrimaryKeyConstraint("tenant_id", "scope"),
    CheckConstraint(one_of("on_absent", ON_ABSENT), name="on_absent"),
)
