"""The sealing keys' check value (issue 25, item 4): one row holding a fixed text sealed with
the key that seals the gateway's secrets. It is written by the first seal (or, for a
database whose sources were sealed before this revision, by the first process whose keys
open one of them), never here: a migration has no key.

Revision ID: 0010_sealing_check
Revises: 0009_fair_take
Create Date: 2026-12-01
"""
import sqlalchemy as sa
from alembic import op

revision = "0010_sealing_check"
down_revision = "0009_fair_take"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sealing_check",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("sealed_at", sa.BigInteger, nullable=False),
        sa.CheckConstraint("id = 1", name="ck_sealing_check_one_row"),
    )


def downgrade() -> None:
    op.drop_table("sealing_check")
