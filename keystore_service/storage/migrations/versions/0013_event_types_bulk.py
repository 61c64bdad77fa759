"""Event types and bulk actions (issue 27, "Event types" and "Bulk actions"): each event's
type as its provider names it (null when it names none), indexed with its source and time for
the filters; a bulk job and the events it acts on, fixed when it starts (one row per event;
storage/bulk_tables.py says why a list and not an id bound), unique per tenant by its
Idempotency-Key.

Revision ID: 0013_event_types_bulk
Revises: 0012_issues_alerts
Create Date: 2026-12-02
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0013_event_types_bulk"
down_revision = "0012_issues_alerts"
branch_labels = None
depends_on = None

JOB_STATES = ("running", "done", "cancelled", "failed")  # domain/bulk.py, as of this revision
ACTIONS = ("redeliver", "retry", "dismiss")
Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _exact(length: int):
    return sa.String(length).with_variant(postgresql.VARCHAR(length, collation="C"),
                                          "postgresql")


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN (" + ", ".join(f"'{v}'" for v in values) + ")"


def upgrade() -> None:
    op.add_column("hook_events", sa.Column("event_type", _exact(128), nullable=True))
    op.create_index("ix_hook_events_source_id_event_type_received_at", "hook_events",
                    ["source_id", "event_type", "received_at"])
    op.create_table(
        "bulk_jobs",
        sa.Column("id", Id, primary_key=True),
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey(
            "tenants.id", name="fk_bulk_jobs_tenant_id_tenants"), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("filter", sa.Text, nullable=False),
        sa.Column("force", sa.Boolean, nullable=False),
        sa.Column("state", sa.String(12), nullable=False),
        sa.Column("matched", sa.Integer, nullable=False),
        sa.Column("done", sa.Integer, nullable=False),
        sa.Column("skipped", sa.Integer, nullable=False),
        sa.Column("started_at", sa.BigInteger, nullable=False),
        sa.Column("finished_at", sa.BigInteger, nullable=True),
        sa.Column("created_by", sa.Text, nullable=False),
        sa.Column("idempotency_key", _exact(255), nullable=True),
        sa.Column("request_hash", sa.String(80), nullable=False),
        sa.Column("lease_holder", sa.String(64), nullable=True),
        sa.Column("lease_until", sa.BigInteger, nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.UniqueConstraint("tenant_id", "idempotency_key",
                            name="uq_bulk_jobs_tenant_id_idempotency_key"),
        sa.CheckConstraint(_one_of("action", ACTIONS), name="ck_bulk_jobs_action"),
        sa.CheckConstraint(_one_of("state", JOB_STATES), name="ck_bulk_jobs_state"),
        sa.CheckConstraint("done + skipped <= matched", name="ck_bulk_jobs_progress"),
    )
    op.create_index("ix_bulk_jobs_state_lease_until", "bulk_jobs", ["state", "lease_until"])
    op.create_index("ix_bulk_jobs_tenant_id_started_at", "bulk_jobs",
                    ["tenant_id", "started_at"])
    op.create_table(
        "bulk_job_items",
        sa.Column("job_id", Id, sa.ForeignKey("bulk_jobs.id", ondelete="CASCADE",
                                          name="fk_bulk_job_items_job_id_bulk_jobs"),
                  nullable=False),
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey(
            "tenants.id", name="fk_bulk_job_items_tenant_id_tenants"), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("event_pk", Id, nullable=False),
        sa.Column("outcome", sa.String(8), nullable=True),
        sa.PrimaryKeyConstraint("job_id", "seq", name="pk_bulk_job_items"),
        sa.CheckConstraint("outcome IS NULL OR outcome IN ('done', 'skipped')",
                           name="ck_bulk_job_items_outcome"),
    )


def downgrade() -> None:
    op.drop_table("bulk_job_items")
    op.drop_index("ix_bulk_jobs_tenant_id_started_at", "bulk_jobs")
    op.drop_index("ix_bulk_jobs_state_lease_until", "bulk_jobs")
    op.drop_table("bulk_jobs")
    op.drop_index("ix_hook_events_source_id_event_type_received_at", "hook_events")
    with op.batch_alter_table("hook_events") as b:
        b.drop_column("event_type")
