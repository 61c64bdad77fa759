"""Each event belongs to one destination of its source (issue 29, "Routing: several
destinations"): `hook_events.destination_id`, backfilled with the source's destination (0020
gave every source one, `default`). The take, the count in flight, the rate, a pause, the
probe and the order per key are then reckoned per destination, not per source, so that a
source's destinations can be served on their own. The take's two indexes are by destination.

A downgrade drops the column and puts the indexes back by source.

Revision ID: 0021_event_destinations
Revises: 0020_destinations
Create Date: 2026-12-15
"""
import sqlalchemy as sa
from alembic import op

revision = "0021_event_destinations"
down_revision = "0020_destinations"
branch_labels = None
depends_on = None

HAS_KEY = "ordering_key IS NOT NULL"
DUE = "ix_hook_events_{}_state_next_attempt_at"
SERIAL = "ix_hook_events_serial"  # a key's other unsettled events: the take's look (0018)


def _indexes(by: str) -> None:
    op.create_index(DUE.format(by), "hook_events", [by, "state", "next_attempt_at"])
    op.create_index(SERIAL, "hook_events", [by, "ordering_key", "state", "id"],
                    postgresql_where=sa.text(HAS_KEY), sqlite_where=sa.text(HAS_KEY))


def upgrade() -> None:
    op.drop_index(SERIAL, table_name="hook_events")
    op.drop_index(DUE.format("source_id"), table_name="hook_events")
    op.add_column("hook_events", sa.Column("destination_id", sa.Integer, nullable=True))
    op.execute(sa.text("UPDATE hook_events SET destination_id = (SELECT d.id FROM "
                       "hook_destinations d WHERE d.source_id = hook_events.source_id AND "
                       "d.position = 0)"))
    with op.batch_alter_table("hook_events", recreate="auto") as t:
        t.alter_column("destination_id", existing_type=sa.Integer(), nullable=False)
        t.create_foreign_key("fk_hook_events_destination_id_hook_destinations",
                             "hook_destinations", ["destination_id"], ["id"])
    _indexes("destination_id")


def downgrade() -> None:
    op.drop_index(SERIAL, table_name="hook_events")
    op.drop_index(DUE.format("destination_id"), table_name="hook_events")
    with op.batch_alter_table("hook_events", recreate="auto") as t:
        t.drop_constraint("fk_hook_events_destination_id_hook_destinations", type_="foreignkey")
        t.drop_column("destination_id")
    _indexes("source_id")
