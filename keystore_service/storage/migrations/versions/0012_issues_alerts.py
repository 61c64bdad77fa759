"""Issues and alerts (issue 27, "Issues and alerts"): `issues` (one live issue, not yet resolved,
per (tenant, kind, subject), by a partial unique index, so that watchers in several
processes cannot open two), `alert_channels` (where a tenant's issues are told; the URL and
the secret sealed like sources' secrets), `alert_notices` (the durable outbox, at most one
notice per (channel, issue, event, seq)), and the sources' two thresholds:
`alert_after_seconds` (forwards failing this long open delivery_failing) and
`backlog_alert_seconds` (an oldest queued event this old opens backlog).

Revision ID: 0012_issues_alerts
Revises: 0011_operator_pause
Create Date: 2026-12-02
"""
import sqlalchemy as sa
from alembic import op

revision = "0012_issues_alerts"
down_revision = "0011_operator_pause"
branch_labels = None
depends_on = None

KINDS = "('delivery_failing', 'backlog', 'source_broken', 'reviews_waiting', 'send_unresolved')"
LIVE = "resolved_at IS NULL"


def _text(length=None):
    base = sa.String(length) if length else sa.Text()
    return base.with_variant(sa.dialects.postgresql.VARCHAR(length, collation="C") if length
                             else sa.dialects.postgresql.TEXT(collation="C"), "postgresql")


Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    # Plain ADD COLUMNs with their CHECKs, as 0009's (SQLite cannot add a table CHECK
    # without rebuilding hook_sources).
    op.execute("ALTER TABLE hook_sources ADD COLUMN alert_after_seconds INTEGER NOT NULL "
               "DEFAULT 300 CONSTRAINT ck_hook_sources_alert_after "
               "CHECK (alert_after_seconds BETWEEN 0 AND 86400)")
    op.execute("ALTER TABLE hook_sources ADD COLUMN backlog_alert_seconds INTEGER NOT NULL "
               "DEFAULT 900 CONSTRAINT ck_hook_sources_backlog_alert "
               "CHECK (backlog_alert_seconds BETWEEN 0 AND 604800)")
    _issues()
    _channels()
    _notices()


def _issues() -> None:
    op.create_table(
        "issues",
        sa.Column("id", Id, primary_key=True),
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("kind", sa.String(24), nullable=False),
        sa.Column("subject", _text(256), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("opened_at", sa.BigInteger, nullable=False),
        sa.Column("last_seen_at", sa.BigInteger, nullable=False),
        sa.Column("count", sa.BigInteger, nullable=False),
        sa.Column("resolved_at", sa.BigInteger, nullable=True),
        sa.Column("acknowledged_by", sa.Text, nullable=True),
        sa.Column("detail", sa.Text, nullable=True),
        sa.CheckConstraint(f"kind IN {KINDS}", name="ck_issues_kind"),
        sa.CheckConstraint("state IN ('open', 'acknowledged', 'resolved', 'ignored')",
                           name="ck_issues_state"),
        sa.CheckConstraint("count >= 0", name="ck_issues_count"),
        sa.CheckConstraint("state <> 'resolved' OR resolved_at IS NOT NULL",
                           name="ck_issues_resolved"),
        sa.CheckConstraint("state NOT IN ('open', 'acknowledged') OR resolved_at IS NULL",
                           name="ck_issues_live"),
    )
    op.create_index("uq_issues_open", "issues", ["tenant_id", "kind", "subject"], unique=True,
                    postgresql_where=sa.text(LIVE), sqlite_where=sa.text(LIVE))
    op.create_index("ix_issues_tenant_id_state_opened_at", "issues",
                    ["tenant_id", "state", "opened_at"])


def _channels() -> None:
    op.create_table(
        "alert_channels",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("name", _text(64), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("sealed", sa.Text, nullable=False),
        sa.Column("shown", sa.Text, nullable=True),
        sa.Column("to_address", sa.Text, nullable=True),
        sa.Column("kinds", sa.Text, nullable=True),
        sa.Column("remind_after_seconds", sa.Integer, nullable=False),
        sa.Column("daily_report", sa.Integer, nullable=False),
        sa.Column("report_day", sa.String(10), nullable=True),
        sa.Column("held_since", sa.BigInteger, nullable=True),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("tenant_id", "name", name="uq_alert_channels_tenant_id_name"),
        sa.CheckConstraint("kind IN ('slack', 'webhook', 'email')", name="ck_alert_channels_kind"),
        sa.CheckConstraint("length(name) BETWEEN 1 AND 64", name="ck_alert_channels_name_length"),
        sa.CheckConstraint("remind_after_seconds = 0 OR remind_after_seconds BETWEEN 5 AND 2592000",
                           name="ck_alert_channels_remind"),
        sa.CheckConstraint("daily_report IN (0, 1)", name="ck_alert_channels_daily_report"),
    )


def _notices() -> None:
    op.create_table(
        "alert_notices",
        sa.Column("id", Id, primary_key=True),
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("channel_id", sa.Integer,
                  sa.ForeignKey("alert_channels.id", ondelete="CASCADE"), nullable=False),
        sa.Column("issue_id", Id, sa.ForeignKey("issues.id", ondelete="CASCADE"), nullable=True),
        sa.Column("event", sa.String(12), nullable=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("state", sa.String(12), nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("next_attempt_at", sa.BigInteger, nullable=False),
        sa.Column("lease_holder", sa.String(64), nullable=True),
        sa.Column("lease_until", sa.BigInteger, nullable=True),
        sa.Column("sent_at", sa.BigInteger, nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.UniqueConstraint("channel_id", "issue_id", "event", "seq",
                            name="uq_alert_notices_channel_id_issue_id_event_seq"),
        sa.CheckConstraint("event IN ('opened', 'resolved', 'reminder', 'test', 'report', "
                           "'more')", name="ck_alert_notices_event"),
        sa.CheckConstraint("state IN ('queued', 'sending', 'sent', 'failed', 'held', 'folded')",
                           name="ck_alert_notices_state"),
    )
    op.create_index("ix_alert_notices_state_next_attempt_at", "alert_notices",
                    ["state", "next_attempt_at"])
    op.create_index("ix_alert_notices_channel_id_sent_at", "alert_notices",
                    ["channel_id", "sent_at"])


def downgrade() -> None:
    op.drop_table("alert_notices")
    op.drop_table("alert_channels")
    op.drop_index("ix_issues_tenant_id_state_opened_at", "issues")
    op.drop_index("uq_issues_open", "issues")
    op.drop_table("issues")
    with op.batch_alter_table("hook_sources") as b:
        b.drop_column("backlog_alert_seconds")
        b.drop_column("alert_after_seconds")
