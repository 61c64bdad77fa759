"""Operations: reviews, the resolution audit trail, job locks, secrets, and indexes for the
reconciler, the sweeper and the report.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def exact(length=None):
    base = sa.String(length) if length else sa.Text()
    pg = postgresql.VARCHAR(length, collation="C") if length else postgresql.TEXT(collation="C")
    return base.with_variant(pg, "postgresql")


def upgrade() -> None:
    _records()
    _reviews()
    _resolutions()
    _job_locks()
    _service_secrets()


def _records() -> None:
    """The columns a review and a result's resource id need, and the indexes of the
    sweeper (expiry), the reconciler (stale leases) and the report (shared resources)."""
    with op.batch_alter_table("records") as batch:
        batch.add_column(sa.Column("review_id", Id, nullable=True))
        batch.add_column(sa.Column("result_resource_id", sa.Text, nullable=True))
    in_progress = sa.text("state = 'in_progress'")
    has_resource = sa.text("result_resource_id IS NOT NULL")
    op.create_index("ix_records_expires_at", "records", ["expires_at"])
    op.create_index("ix_records_stale_leases", "records", ["lease_expires_at"],
                    postgresql_where=in_progress, sqlite_where=in_progress)
    op.create_index("ix_records_resource", "records",
                    ["tenant_id", "scope", "result_resource_id"],
                    postgresql_where=has_resource, sqlite_where=has_resource)


def _reviews() -> None:
    op.create_table(
        "reviews",
        sa.Column("id", Id, primary_key=True),
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey(
            "tenants.id", name="fk_reviews_tenant_id_tenants"), nullable=False),
        sa.Column("record_id", Id, sa.ForeignKey(
            "records.id", ondelete="SET NULL", name="fk_reviews_record_id_records"),
            nullable=True),
        sa.Column("scope", exact(128), nullable=False),
        sa.Column("key", exact(), nullable=False),
        sa.Column("incarnation", sa.Integer, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(24), nullable=False),
        sa.Column("state", sa.String(12), nullable=False),
        sa.Column("opened_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.Column("count", sa.BigInteger, nullable=False),
        sa.Column("original_fingerprint", sa.Text, nullable=True),
        sa.Column("refused_fingerprints", sa.Text, nullable=True),
        sa.Column("resolution", sa.String(24), nullable=True),
        sa.Column("resolved_at", sa.BigInteger, nullable=True),
        sa.Column("resolved_by", sa.Text, nullable=True),
        sa.CheckConstraint("kind IN ('fingerprint_mismatch', 'stale_lease')",
                           name="ck_reviews_kind"),
        sa.CheckConstraint("state IN ('open', 'resolved')", name="ck_reviews_state"),
        sa.CheckConstraint("(state = 'open') = (resolution IS NULL)",
                           name="ck_reviews_resolution"),
    )
    is_open = sa.text("state = 'open'")
    op.create_index("uq_reviews_open", "reviews", ["record_id", "kind"], unique=True,
                    postgresql_where=is_open, sqlite_where=is_open)
    op.create_index("ix_reviews_tenant_id_state_opened_at", "reviews",
                    ["tenant_id", "state", "opened_at"])


def _resolutions() -> None:
    op.create_table(
        "resolutions",
        sa.Column("id", Id, primary_key=True),
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey(
            "tenants.id", name="fk_resolutions_tenant_id_tenants"), nullable=False),
        sa.Column("record_id", Id, nullable=True),
        sa.Column("review_id", Id, nullable=True),
        sa.Column("scope", exact(128), nullable=False),
        sa.Column("key", exact(), nullable=False),
        sa.Column("action", sa.String(24), nullable=False),
        sa.Column("actor", sa.Text, nullable=False),
        sa.Column("at", sa.BigInteger, nullable=False),
        sa.Column("before", sa.Text, nullable=True),
        sa.Column("after", sa.Text, nullable=True),
    )
    op.create_index("ix_resolutions_tenant_id_scope_key", "resolutions",
                    ["tenant_id", "scope", "key"])


def _job_locks() -> None:
    op.create_table(
        "job_locks",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("holder", sa.Text, nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
    )


def _service_secrets() -> None:
    op.create_table(
        "service_secrets",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )

def downgrade() -> None:
    for table in ("service_secrets", "job_locks", "resolutions", "reviews"):
        op.drop_table(table)
    for index in ("ix_records_resource", "ix_records_stale_leases", "ix_records_expires_at"):
        op.drop_index(index, "records")
    with op.batch_alter_table("records") as batch:
        batch.drop_column("result_resource_id")
        batch.drop_column("review_id")
