"""Record versions for upsert-if-newer (polling overlap).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("records") as batch:
        batch.add_column(sa.Column("version_kind", sa.String(8), nullable=True))
        batch.add_column(sa.Column("version", sa.BigInteger, nullable=True))
        batch.create_check_constraint(
            "ck_records_version",
            "(version_kind IS NULL AND version IS NULL) OR "
            "(version_kind IN ('int', 'time') AND version IS NOT NULL)")


def downgrade() -> None:
    with op.batch_alter_table("records") as batch:
        batch.drop_constraint("ck_records_version", type_="check")
        batch.drop_column("version")
        batch.drop_column("version_kind")
