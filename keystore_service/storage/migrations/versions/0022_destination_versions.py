"""A newer_wins key's last delivered version is its destination's (issue 29, "Ordering per
key", with several destinations): `hook_versions` is keyed by (destination, key), not (source,
key), so that two destinations of a source that order the same key each compare with what
they delivered. Every stored version goes to its source's destination (0020 gave each source
one); the table's primary key becomes (destination_id, ordering_key).

A downgrade keys the versions by source again, keeping those of each source's first
destination (position 0, the one v1.1 knows) and forgetting the others'.

Revision ID: 0022_destination_versions
Revises: 0021_event_destinations
Create Date: 2026-12-16
"""
import sqlalchemy as sa
from alembic import op

revision = "0022_destination_versions"
down_revision = "0021_event_destinations"
branch_labels = None
depends_on = None

PK = "pk_hook_versions"


def upgrade() -> None:
    op.add_column("hook_versions", sa.Column("destination_id", sa.Integer, nullable=True))
    op.execute(sa.text("UPDATE hook_versions SET destination_id = (SELECT d.id FROM "
                       "hook_destinations d WHERE d.source_id = hook_versions.source_id AND "
                       "d.position = 0)"))
    with op.batch_alter_table("hook_versions", recreate="auto") as t:
        t.drop_constraint(PK, type_="primary")
        t.drop_column("source_id")
        t.alter_column("destination_id", existing_type=sa.Integer(), nullable=False)
        t.create_foreign_key("fk_hook_versions_destination_id_hook_destinations",
                             "hook_destinations", ["destination_id"], ["id"],
                             ondelete="CASCADE")
        t.create_primary_key(PK, ["destination_id", "ordering_key"])


def downgrade() -> None:
    op.execute(sa.text("DELETE FROM hook_versions WHERE destination_id NOT IN (SELECT d.id "
                       "FROM hook_destinations d WHERE d.position = 0)"))
    op.add_column("hook_versions", sa.Column("source_id", sa.Integer, nullable=True))
    op.execute(sa.text("UPDATE hook_versions SET source_id = (SELECT d.source_id FROM "
                       "hook_destinations d WHERE d.id = hook_versions.destination_id)"))
    with op.batch_alter_table("hook_versions", recreate="auto") as t:
        t.drop_constraint(PK, type_="primary")
        t.drop_column("destination_id")
        t.alter_column("source_id", existing_type=sa.Integer(), nullable=False)
        t.create_foreign_key("fk_hook_versions_source_id_hook_sources", "hook_sources",
                             ["source_id"], ["id"], ondelete="CASCADE")
        t.create_primary_key(PK, ["source_id", "ordering_key"])
