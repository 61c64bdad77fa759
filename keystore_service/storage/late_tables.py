"""The tables of claims v1.1's late repeats and kept payloads (migration 0008): a purged
record's trace, the late repeats found against it, and the payloads kept for a person. On the
same `metadata` as tables.py, which imports them at its end (tables.late_traces and the rest
keep working)."""
from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
)

from keystore_service.storage.tables import Id, exact_text, metadata

# The compact trace of a finished record the sweeper purged (never its result body): a claim
# that acquires the key afresh with the same fingerprint within `late_repeat_window` of the
# expiry is a late repeat. Kept until expired_at + the window, then purged in batches.
late_traces = Table(
    "late_traces", metadata,
    Column("tenant_id", Integer, ForeignKey("tenants.id"), primary_key=True),
    Column("scope", exact_text(128), primary_key=True),
    Column("key", exact_text(), primary_key=True),
    Column("fingerprint", exact_text(256), nullable=False),
    Column("resource_id", Text, nullable=True),
    Column("first_seen_at", BigInteger, nullable=False),
    Column("expired_at", BigInteger, nullable=False),
    Index(None, "expired_at"),
)

# Each late repeat seen (what the record page and the daily report show; no foreign key: the
# report's figures outlive the record). Kept as long as traces are.
late_repeats = Table(
    "late_repeats", metadata,
    Column("id", Id, primary_key=True),
    Column("tenant_id", Integer, ForeignKey("tenants.id"), nullable=False),
    Column("scope", exact_text(128), nullable=False),
    Column("key", exact_text(), nullable=False),
    Column("at", BigInteger, nullable=False),
    Column("policy", String(8), nullable=False),
    Column("first_seen_at", BigInteger, nullable=False),
    Column("expired_at", BigInteger, nullable=False),
    Column("resource_id", Text, nullable=True),
    CheckConstraint("policy IN ('allow', 'review')", name="policy"),
    Index(None, "tenant_id", "scope", "key"),
    Index(None, "tenant_id", "at"),
)

# A claim's canonical payload, kept when it asked (`keep_payload`) so a person can compare
# it with a refused one; removed with its record, at a new incarnation, and on expiry.
kept_payloads = Table(
    "kept_payloads", metadata,
    Column("record_id", Id, ForeignKey("records.id", ondelete="CASCADE"), primary_key=True),
    Column("incarnation", Integer, nullable=False),
    Column("payload", Text, nullable=False),
)
