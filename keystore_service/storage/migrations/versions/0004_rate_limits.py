"""Per-token rate limits: the request count of each token's current window.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rate_limits",
        sa.Column("token_id", sa.Integer, primary_key=True),
        sa.Column("window_start", sa.BigInteger, nullable=False),
        sa.Column("count", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("rate_limits")
