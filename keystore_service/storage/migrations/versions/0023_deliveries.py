"""An event is one delivery per destination of its source (issue 29, "Routing: several
destinations"): `hook_events` keeps a row per (record, destination), so its unique record_id
becomes unique (record_id, destination_id); a destination may carry its own forwarding
options (`config`: JSON of retry_statuses, delivered_header, rate, filter, ordering) and its
own sealed headers and signing secret (`sealed`). Both are null for the v1.1 destination,
`default`, which keeps reading them from its source (its config's `forward`, its sealed
`headers` and `destination_secret`), so nothing is moved and every existing event is the
one delivery of its record.

A downgrade needs each record's one row back: it keeps, per record, the delivery to the
source's first destination (position 0) and deletes the others with their attempts, then
drops the destinations after the first with their two columns.

Revision ID: 0023_deliveries
Revises: 0022_destination_versions
Create Date: 2026-12-18
"""
import sqlalchemy as sa
from alembic import op

revision = "0023_deliveries"
down_revision = "0022_destination_versions"
branch_labels = None
depends_on = None

OLD = "uq_hook_events_record_id"
NEW = "uq_hook_events_record_id_destination_id"


def upgrade() -> None:
    with op.batch_alter_table("hook_destinations") as t:
        t.add_column(sa.Column("config", sa.Text, nullable=True))
        t.add_column(sa.Column("sealed", sa.Text, nullable=True))
    with op.batch_alter_table("hook_events", recreate="auto") as t:
        t.drop_constraint(OLD, type_="unique")
        t.create_unique_constraint(NEW, ["record_id", "destination_id"])


def downgrade() -> None:
    later = "SELECT d.id FROM hook_destinations d WHERE d.position > 0"
    op.execute(sa.text(f"DELETE FROM hook_attempts WHERE event_pk IN (SELECT e.id FROM "
                       f"hook_events e WHERE e.destination_id IN ({later}))"))
    op.execute(sa.text(f"DELETE FROM hook_events WHERE destination_id IN ({later})"))
    op.execute(sa.text("DELETE FROM hook_destinations WHERE position > 0"))
    with op.batch_alter_table("hook_events", recreate="auto") as t:
        t.drop_constraint(NEW, type_="unique")
        t.create_unique_constraint(OLD, ["record_id"])
    with op.batch_alter_table("hook_destinations") as t:
        t.drop_column("sealed")
        t.drop_column("config")
