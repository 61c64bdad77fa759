"""The issues and alerts' tables (issue 27, "Issues and alerts"; migration 0012): issues, the
channels that are told of them, and the notices' durable outbox. On the same `metadata` as
tables.py, which imports this module at its end so that every table is known there."""
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
    UniqueConstraint,
    text,
)

from keystore_service.domain.issues import EVENTS, ISSUE_STATES, KINDS, NOTICE_STATES
from keystore_service.storage.tables import Id, exact_text, metadata, one_of

LIVE = "resolved_at IS NULL"  # the issue that counts for its (tenant, kind, subject)


# Something that needs a person: one issue per (tenant, kind, subject) until its condition
# clears or a person resolves it (`resolved_at` null: the partial unique index refuses a
# second watcher's insert, which counts on the first instead). An ignored issue stays live
# (so its condition opens no other) until the condition clears; a resolved one is history,
# and the next occurrence opens a new issue.
issues = Table(
    "issues", metadata,
    Column("id", Id, primary_key=True),
    Column("tenant_id", Integer, ForeignKey("tenants.id"), nullable=False),
    Column("kind", String(24), nullable=False),
    Column("subject", exact_text(256), nullable=False),
    Column("state", String(16), nullable=False),
    Column("opened_at", BigInteger, nullable=False),
    Column("last_seen_at", BigInteger, nullable=False),
    Column("count", BigInteger, nullable=False),
    Column("resolved_at", BigInteger, nullable=True),
    Column("acknowledged_by", Text, nullable=True),
    Column("detail", Text, nullable=True),  # what opened it, in a line (never a body)
    CheckConstraint(one_of("kind", KINDS), name="kind"),
    CheckConstraint(one_of("state", ISSUE_STATES), name="state"),
    CheckConstraint("count >= 0", name="count"),
    CheckConstraint("state <> 'resolved' OR resolved_at IS NOT NULL", name="resolved"),
    CheckConstraint("state NOT IN ('open', 'acknowledged') OR resolved_at IS NULL",
                    name="live"),
    Index("uq_issues_open", "tenant_id", "kind", "subject", unique=True,
          postgresql_where=text(LIVE), sqlite_where=text(LIVE)),
    Index(None, "tenant_id", "state", "opened_at"),
)

# Where a tenant's issues are told. `sealed` holds the URL and the signing secret (sealed as
# sources' secrets are); `shown` is what the API may show of the URL (scheme and host).
alert_channels = Table(
    "alert_channels", metadata,
    Column("id", Integer, primary_key=True),
    Column("tenant_id", Integer, ForeignKey("tenants.id"), nullable=False),
    Column("name", exact_text(64), nullable=False),
    Column("kind", String(8), nullable=False),
    Column("sealed", Text, nullable=False),
    Column("shown", Text, nullable=True),
    Column("to_address", Text, nullable=True),  # email: one address, checked, no CR/LF
    Column("kinds", Text, nullable=True),  # JSON list of issue kinds; null: all
    Column("remind_after_seconds", Integer, nullable=False),
    Column("daily_report", Integer, nullable=False),
    Column("report_day", String(10), nullable=True),  # the last day whose report went
    Column("held_since", BigInteger, nullable=True),  # notices held by the hourly bound
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    UniqueConstraint("tenant_id", "name"),
    CheckConstraint("kind IN ('slack', 'webhook', 'email')", name="kind"),
    CheckConstraint("length(name) BETWEEN 1 AND 64", name="name_length"),
    CheckConstraint("remind_after_seconds = 0 OR remind_after_seconds BETWEEN 5 AND 2592000",
                    name="remind"),
    CheckConstraint("daily_report IN (0, 1)", name="daily_report"),
)

# The outbox: one row per notice to send, at most one per (channel, issue, event, seq) (a
# reminder's seq is its number; opened and resolved have 0). Sent by alerts.Sender under a
# lease, retried with backoff; `body` is the issue as it was when the notice was made.
alert_notices = Table(
    "alert_notices", metadata,
    Column("id", Id, primary_key=True),
    Column("tenant_id", Integer, ForeignKey("tenants.id"), nullable=False),
    Column("channel_id", Integer, ForeignKey("alert_channels.id", ondelete="CASCADE"),
           nullable=False),
    Column("issue_id", Id, ForeignKey("issues.id", ondelete="CASCADE"), nullable=True),
    Column("event", String(12), nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("state", String(12), nullable=False),
    Column("body", Text, nullable=False),  # JSON
    Column("attempts", Integer, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("next_attempt_at", BigInteger, nullable=False),
    Column("lease_holder", String(64), nullable=True),
    Column("lease_until", BigInteger, nullable=True),
    Column("sent_at", BigInteger, nullable=True),
    Column("last_error", Text, nullable=True),
    UniqueConstraint("channel_id", "issue_id", "event", "seq"),
    CheckConstraint(one_of("event", EVENTS), name="event"),
    CheckConstraint(one_of("state", NOTICE_STATES), name="state"),
    Index(None, "state", "next_attempt_at"),  # the sender's due notices
    Index(None, "channel_id", "sent_at"),  # the hourly bound
)
