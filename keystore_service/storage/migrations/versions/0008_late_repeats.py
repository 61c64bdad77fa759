"""Claims v1.1: traces of purged records and the late repeats they reveal; kept payloads.

Revision ID: 0008_late_repeats
Revises: 0007_hooks
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008_late_repeats"
down_revision = "0007_hooks"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def exact(length=None):
    base = sa.String(length) if length else sa.Text()
    return base.with_variant(postgresql.VARCHAR(length, collation="C") if length
                             else postgresql.TEXT(collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "late_traces",
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey(
            "tenants.id", name="fk_late_traces_tenant_id_tenants"), primary_key=True),
        sa.Column("scope", exact(128), primary_key=True),
        sa.Column("key", exact(), primary_key=True),
        sa.Column("fingerprint", exact(256), nullable=False),
        sa.Column("resource_id", sa.Text, nullable=True),
        sa.Column("first_seen_at", sa.BigInteger, nullable=False),
        sa.Column("expired_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_late_traces_expired_at", "late_traces", ["expired_at"])
    op.create_table(
        "late_repeats",
        sa.Column("id", Id, primary_key=True),
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey(
            "tenants.id", name="fk_late_repeats_tenant_id_tenants"), nullable=False),
        sa.Column("scope", exact(128), nullable=False),
        sa.Column("key", exact(), nullable=False),
        sa.Column("at", sa.BigInteger, nullable=False),
        sa.Column("policy", sa.String(8), nullable=False),
        sa.Column("first_seen_at", sa.BigInteger, nullable=False),
        sa.Column("expired_at", sa.BigInteger, nullable=False),
        sa.Column("resource_id", sa.Text, nullable=True),
        sa.CheckConstraint("policy IN ('allow', 'review')", name="ck_late_repeats_policy"),
    )
    op.create_index("ix_late_repeats_tenant_id_scope_key", "late_repeats",
                    ["tenant_id", "scope", "key"])
    op.create_index("ix_late_repeats_tenant_id_at", "late_repeats", ["tenant_id", "at"])
    op.create_table(
        "kept_payloads",
        sa.Column("record_id", Id, sa.ForeignKey(
            "records.id", ondelete="CASCADE", name="fk_kept_payloads_record_id_records"),
            primary_key=True),
        sa.Column("incarnation", sa.Integer, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
    )


def downgrade() -> None:
    for table in ("kept_payloads", "late_repeats", "late_traces"):
        op.drop_table(table)
