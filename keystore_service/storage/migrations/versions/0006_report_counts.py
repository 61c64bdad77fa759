"""Counts that outlive their records: the daily report's figures of purged records, and the
lease expiries behind keystore_lease_expiries_total.

Revision ID: 0006_report_counts
Revises: 0005_ui_sessions
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006_report_counts"
down_revision = "0005_ui_sessions"
branch_labels = None
depends_on = None

COUNTS = ("claimed", "succeeded", "failed", "released", "taken_over", "resolved",
          "duplicates_suppressed")


def exact(length):
    return sa.String(length).with_variant(postgresql.VARCHAR(length, collation="C"),
                                          "postgresql")


def upgrade() -> None:
    op.create_table(
        "report_counts",
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey(
            "tenants.id", name="fk_report_counts_tenant_id_tenants"), primary_key=True),
        sa.Column("scope", exact(128), primary_key=True),
        sa.Column("day", sa.String(10), primary_key=True),
        *[sa.Column(name, sa.BigInteger, nullable=False) for name in COUNTS],
        sa.CheckConstraint(" AND ".join(f"{name} >= 0" for name in COUNTS),
                           name="ck_report_counts_counts"),
    )
    op.create_index("ix_report_counts_day", "report_counts", ["day"])
    op.create_table(
        "lease_expiries",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("scope", exact(128), nullable=False),
        sa.Column("count", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("scope", name="uq_lease_expiries_scope"),
        sa.CheckConstraint("count >= 0", name="ck_lease_expiries_count"),
    )


def downgrade() -> None:
    op.drop_table("lease_expiries")
    op.drop_index("ix_report_counts_day", "report_counts")
    op.drop_table("report_counts")
