"""The operators' page's sessions, one row per sign-in, so that signing out ends a session on
every worker and instance (issue 13: a copied cookie kept working after sign-out).

Revision ID: 0005_ui_sessions
Revises: 0004
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005_ui_sessions"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ui_sessions",
        sa.Column("id_hash", sa.String(64), primary_key=True),
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey(
            "tenants.id", name="fk_ui_sessions_tenant_id_tenants"), nullable=False),
        sa.Column("token_name", sa.String(128).with_variant(
            postgresql.VARCHAR(128, collation="C"), "postgresql"), nullable=False),
        sa.Column("signed_in_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_ui_sessions_signed_in_at", "ui_sessions", ["signed_in_at"])


def downgrade() -> None:
    op.drop_table("ui_sessions")
