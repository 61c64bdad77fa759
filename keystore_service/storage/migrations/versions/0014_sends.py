"""Outbound sends (issue 28, "Outbound: connections, sends once, settlement by asking the
destination"): `connections` (a tenant's downstream APIs, their headers sealed),
`sends` (one per record incarnation sent through a connection, its request sealed until it
settles), `send_attempts` (each request and what it came to), `record_checks` (each check's
run against a record and its verdict), `scope_settlements` (a scope's check for its plain
claims), and the review kind `send_unknown`.

Revision ID: 0014_sends
Revises: 0013_event_types_bulk
Create Date: 2026-12-02
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0014_sends"
down_revision = "0013_event_types_bulk"
branch_labels = None
depends_on = None

# As of this revision (domain/records.ReviewKind, domain/sends.py).
OLD_KINDS = "('fingerprint_mismatch', 'stale_lease', 'delivery_failed', 'late_repeat')"
KINDS = ("('fingerprint_mismatch', 'stale_lease', 'delivery_failed', 'late_repeat', "
         "'send_unknown')")
SEND_STATES = ("queued", "sending", "checking", "succeeded", "failed", "unresolved")
CLASSES = ("succeeded", "failed", "retry", "unknown")
VERDICTS = ("found", "absent", "unclear")
Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _text(length=None):
    base = sa.String(length) if length else sa.Text()
    return base.with_variant(postgresql.VARCHAR(length, collation="C") if length
                             else postgresql.TEXT(collation="C"), "postgresql")


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN (" + ", ".join(f"'{v}'" for v in values) + ")"


def upgrade() -> None:
    _review_kinds(KINDS)
    _connections()
    _sends()
    _attempts()
    _checks()
    _settlements()


def _review_kinds(kinds: str) -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:  # SQLite rebuilds the table to change a CHECK; its partial index goes first
        op.drop_index("uq_reviews_open", "reviews")
    with op.batch_alter_table("reviews", recreate="auto") as b:
        b.drop_constraint("ck_reviews_kind", type_="check")
        b.create_check_constraint("ck_reviews_kind", f"kind IN {kinds}")
    if sqlite:
        op.create_index("uq_reviews_open", "reviews", ["record_id", "kind"], unique=True,
                        sqlite_where=sa.text("state = 'open'"))


def _connections() -> None:
    op.create_table(
        "connections",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey(
            "tenants.id", name="fk_connections_tenant_id_tenants"), nullable=False),
        sa.Column("name", _text(64), nullable=False),
        sa.Column("base_url", sa.Text, nullable=False),
        sa.Column("sealed", sa.Text, nullable=False),
        sa.Column("header_names", sa.Text, nullable=False),
        sa.Column("idempotency_header", sa.String(64), nullable=True),
        sa.Column("timeout_seconds", sa.Integer, nullable=False),
        sa.Column("retry_window_seconds", sa.Integer, nullable=False),
        sa.Column("max_in_flight", sa.Integer, nullable=False),
        sa.Column("rate", sa.Text, nullable=True),
        sa.Column("check_spec", sa.Text, nullable=True),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("tenant_id", "name", name="uq_connections_tenant_id_name"),
        sa.CheckConstraint("length(name) BETWEEN 1 AND 64", name="ck_connections_name_length"),
        sa.CheckConstraint("timeout_seconds BETWEEN 1 AND 60", name="ck_connections_timeout"),
        sa.CheckConstraint("retry_window_seconds >= 10", name="ck_connections_window"),
        sa.CheckConstraint("max_in_flight BETWEEN 1 AND 256", name="ck_connections_in_flight"),
    )


def _sends() -> None:
    op.create_table(
        "sends",
        sa.Column("id", Id, primary_key=True),
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey(
            "tenants.id", name="fk_sends_tenant_id_tenants"), nullable=False),
        sa.Column("connection_id", sa.Integer, sa.ForeignKey(
            "connections.id", name="fk_sends_connection_id_connections", ondelete="SET NULL"),
            nullable=True),
        sa.Column("connection_name", _text(64), nullable=False),
        sa.Column("record_id", Id, sa.ForeignKey(
            "records.id", name="fk_sends_record_id_records", ondelete="CASCADE"),
            nullable=False),
        sa.Column("incarnation", sa.Integer, nullable=False),
        sa.Column("reference", _text(), nullable=False),
        sa.Column("method", sa.String(8), nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("resource_id_pointer", sa.Text, nullable=True),
        sa.Column("sealed", sa.Text, nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("unknown", sa.Integer, nullable=False),
        sa.Column("check_tries", sa.Integer, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("window_end", sa.BigInteger, nullable=False),
        sa.Column("next_attempt_at", sa.BigInteger, nullable=False),
        sa.Column("lease_holder", sa.String(64), nullable=True),
        sa.Column("lease_until", sa.BigInteger, nullable=True),
        sa.Column("settled_at", sa.BigInteger, nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.UniqueConstraint("record_id", "incarnation",
                            name="uq_sends_record_id_incarnation"),
        sa.CheckConstraint(_one_of("state", SEND_STATES), name="ck_sends_state"),
        sa.CheckConstraint("unknown IN (0, 1)", name="ck_sends_unknown"),
    )
    op.create_index("ix_sends_state_next_attempt_at", "sends", ["state", "next_attempt_at"])
    op.create_index("ix_sends_connection_id_state", "sends", ["connection_id", "state"])
    op.create_index("ix_sends_tenant_id_created_at", "sends", ["tenant_id", "created_at"])


def _attempts() -> None:
    op.create_table(
        "send_attempts",
        sa.Column("id", Id, primary_key=True),
        sa.Column("send_id", Id, sa.ForeignKey(
            "sends.id", name="fk_send_attempts_send_id_sends", ondelete="CASCADE"),
            nullable=False),
        sa.Column("at", sa.BigInteger, nullable=False),
        sa.Column("duration_ms", sa.Integer, nullable=False),
        sa.Column("status_code", sa.Integer, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("class", sa.String(12), nullable=False),
        sa.Column("answer", sa.Text, nullable=True),
        sa.CheckConstraint(_one_of("class", CLASSES), name="ck_send_attempts_class"),
    )
    op.create_index("ix_send_attempts_send_id_at", "send_attempts", ["send_id", "at"])


def _checks() -> None:
    op.create_table(
        "record_checks",
        sa.Column("id", Id, primary_key=True),
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey(
            "tenants.id", name="fk_record_checks_tenant_id_tenants"), nullable=False),
        sa.Column("record_id", Id, sa.ForeignKey(
            "records.id", name="fk_record_checks_record_id_records", ondelete="CASCADE"),
            nullable=False),
        sa.Column("incarnation", sa.Integer, nullable=False),
        sa.Column("at", sa.BigInteger, nullable=False),
        sa.Column("status_code", sa.Integer, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("verdict", sa.String(8), nullable=False),
        sa.Column("resource_id", sa.Text, nullable=True),
        sa.Column("answer", sa.Text, nullable=True),
        sa.CheckConstraint(_one_of("verdict", VERDICTS), name="ck_record_checks_verdict"),
    )
    op.create_index("ix_record_checks_record_id_at", "record_checks", ["record_id", "at"])


def _settlements() -> None:
    op.create_table(
        "scope_settlements",
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey(
            "tenants.id", name="fk_scope_settlements_tenant_id_tenants"), nullable=False),
        sa.Column("scope", _text(128), nullable=False),
        sa.Column("connection_id", sa.Integer, sa.ForeignKey(
            "connections.id", name="fk_scope_settlements_connection_id_connections",
            ondelete="CASCADE"), nullable=False),
        sa.Column("check_spec", sa.Text, nullable=False),
        sa.Column("on_absent", sa.String(8), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "scope", name="pk_scope_settlements"),
        sa.CheckConstraint("on_absent IN ('release', 'review')",
                           name="ck_scope_settlements_on_absent"),
    )


def downgrade() -> None:
    op.drop_table("scope_settlements")
    op.drop_table("record_checks")
    op.drop_table("send_attempts")
    op.drop_table("sends")
    op.drop_table("connections")
    op.execute("DELETE FROM reviews WHERE kind = 'send_unknown'")
    _review_kinds(OLD_KINDS)
