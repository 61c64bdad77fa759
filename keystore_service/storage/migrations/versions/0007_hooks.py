"""The inbound webhook gateway: sources, accepted events, their forwarding attempts; review
kinds for failed deliveries and late repeats, and a kept body beside a review.

Revision ID: 0007_hooks
Revises: 0006_report_counts
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007_hooks"
down_revision = "0006_report_counts"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
KINDS = "('fingerprint_mismatch', 'stale_lease', 'delivery_failed', 'late_repeat')"


def exact(length=None):
    base = sa.String(length) if length else sa.Text()
    return base.with_variant(postgresql.VARCHAR(length, collation="C") if length
                             else postgresql.TEXT(collation="C"), "postgresql")


def upgrade() -> None:
    _reviews()
    _hook_sources()
    _hook_events()
    _hook_attempts()


def _reviews() -> None:
    """Two review kinds more (delivery_failed, late_repeat), and a kept body beside a review."""
    sqlite = op.get_bind().dialect.name == "sqlite"
    is_open = sa.text("state = 'open'")
    if sqlite:  # SQLite rebuilds the table to change a CHECK; its partial index goes first
        op.drop_index("uq_reviews_open", "reviews")
    with op.batch_alter_table("reviews", recreate="auto") as b:
        b.drop_constraint("ck_reviews_kind", type_="check")
        b.create_check_constraint("ck_reviews_kind", f"kind IN {KINDS}")
        b.add_column(sa.Column("kept", sa.Text, nullable=True))
    if sqlite:
        op.create_index("uq_reviews_open", "reviews", ["record_id", "kind"], unique=True,
                        sqlite_where=is_open)


def _hook_sources() -> None:
    op.create_table(
        "hook_sources",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey(
            "tenants.id", name="fk_hook_sources_tenant_id_tenants"), nullable=False),
        sa.Column("name", exact(64), nullable=False),
        sa.Column("provider", sa.String(32), nullable=False),
        sa.Column("ingest_hash", sa.String(64), nullable=False),
        sa.Column("sealed", sa.Text, nullable=False),
        sa.Column("config", sa.Text, nullable=False),
        sa.Column("destination_url", sa.Text, nullable=False),
        sa.Column("timeout_seconds", sa.Integer, nullable=False),
        sa.Column("ttl_seconds", sa.BigInteger, nullable=False),
        sa.Column("retry_window_seconds", sa.BigInteger, nullable=False),
        sa.Column("max_in_flight", sa.Integer, nullable=False),
        sa.Column("keep_body_seconds", sa.BigInteger, nullable=False),
        sa.Column("state", sa.String(12), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.Column("paused_until", sa.BigInteger, nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("last_error_at", sa.BigInteger, nullable=True),
        sa.UniqueConstraint("ingest_hash", name="uq_hook_sources_ingest_hash"),
        sa.UniqueConstraint("tenant_id", "name", name="uq_hook_sources_tenant_id_name"),
        sa.CheckConstraint("state IN ('active', 'disabled')", name="ck_hook_sources_state"),
        sa.CheckConstraint("length(name) BETWEEN 1 AND 64", name="ck_hook_sources_name_length"),
        sa.CheckConstraint("timeout_seconds BETWEEN 1 AND 60 AND max_in_flight >= 1 AND "
                           "ttl_seconds >= 1 AND retry_window_seconds >= 1",
                           name="ck_hook_sources_limits"),
    )


def _hook_events() -> None:
    op.create_table(
        "hook_events",
        sa.Column("id", Id, primary_key=True),
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey(
            "tenants.id", name="fk_hook_events_tenant_id_tenants"), nullable=False),
        sa.Column("source_id", sa.Integer, sa.ForeignKey(
            "hook_sources.id", name="fk_hook_events_source_id_hook_sources"), nullable=False),
        sa.Column("record_id", Id, sa.ForeignKey(
            "records.id", ondelete="CASCADE", name="fk_hook_events_record_id_records"),
            nullable=False),
        sa.Column("event_id", exact(), nullable=False),
        sa.Column("state", sa.String(12), nullable=False),
        sa.Column("body", sa.LargeBinary, nullable=True),
        sa.Column("headers", sa.Text, nullable=False),
        sa.Column("received_at", sa.BigInteger, nullable=False),
        sa.Column("window_start", sa.BigInteger, nullable=False),
        sa.Column("next_attempt_at", sa.BigInteger, nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("lease_holder", sa.String(64), nullable=True),
        sa.Column("lease_until", sa.BigInteger, nullable=True),
        sa.Column("delivered_at", sa.BigInteger, nullable=True),
        sa.Column("body_dropped_at", sa.BigInteger, nullable=True),
        sa.UniqueConstraint("record_id", name="uq_hook_events_record_id"),
        sa.CheckConstraint("state IN ('queued', 'delivering', 'delivered', 'failed')",
                           name="ck_hook_events_state"),
        sa.CheckConstraint("state <> 'delivering' OR lease_until IS NOT NULL",
                           name="ck_hook_events_lease"),
    )
    op.create_index("ix_hook_events_state_next_attempt_at", "hook_events",
                    ["state", "next_attempt_at"])
    op.create_index("ix_hook_events_source_id_state", "hook_events", ["source_id", "state"])
    op.create_index("ix_hook_events_tenant_id_received_at", "hook_events",
                    ["tenant_id", "received_at"])


def _hook_attempts() -> None:
    op.create_table(
        "hook_attempts",
        sa.Column("id", Id, primary_key=True),
        sa.Column("event_pk", Id, sa.ForeignKey(
            "hook_events.id", ondelete="CASCADE", name="fk_hook_attempts_event_pk_hook_events"),
            nullable=False),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("at", sa.BigInteger, nullable=False),
        sa.Column("duration_ms", sa.Integer, nullable=False),
        sa.Column("status_code", sa.Integer, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("answer", sa.Text, nullable=True),
    )
    op.create_index("ix_hook_attempts_event_pk", "hook_attempts", ["event_pk"])

def downgrade() -> None:
    op.drop_table("hook_attempts")
    op.drop_table("hook_events")
    op.drop_table("hook_sources")
    with op.batch_alter_table("reviews") as b:
        b.drop_column("kept")
