"""A failed delivery has a `delivery_failed` review of its own (issue 29, "Routing: several
destinations": each (event, destination) is a delivery with its own review). `reviews` gains
`destination`, the name of the destination whose delivery the review is about ('' for every
other review), and the one open review per (record, kind) becomes one per (record, kind,
destination). An existing delivery_failed review is given the destination of its record's
failed delivery (else its first one): before this, an event had one such review, opened by
its first delivery that failed for good.

A downgrade keeps each record's oldest open review of a kind open and resolves the later
ones (resolution `downgraded`), so that the narrower index holds again.

Revision ID: 0024_delivery_reviews
Revises: 0023_deliveries
Create Date: 2026-12-07
"""
import sqlalchemy as sa
from alembic import op

revision = "0024_delivery_reviews"
down_revision = "0023_deliveries"
branch_labels = None
depends_on = None

INDEX = "uq_reviews_open"
IS_OPEN = sa.text("state = 'open'")
# The name of a record's delivery's destination, its failed one first, then by position.
_NAME = ("(SELECT d.name FROM hook_events e JOIN hook_destinations d ON d.id = e.destination_id "
         "WHERE e.record_id = reviews.record_id ORDER BY CASE WHEN e.state = 'failed' THEN 0 "
         "ELSE 1 END, d.position LIMIT 1)")


def _index(columns: list[str]) -> None:
    op.create_index(INDEX, "reviews", columns, unique=True, postgresql_where=IS_OPEN,
                    sqlite_where=IS_OPEN)


def upgrade() -> None:
    op.drop_index(INDEX, "reviews")
    op.add_column("reviews", sa.Column("destination", sa.String(64), nullable=False,
                                       server_default=""))
    op.execute(sa.text(f"UPDATE reviews SET destination = COALESCE({_NAME}, '') WHERE "
                       "kind = 'delivery_failed' AND record_id IS NOT NULL"))
    _index(["record_id", "kind", "destination"])


def downgrade() -> None:
    op.execute(sa.text(
        "UPDATE reviews SET state = 'resolved', resolution = 'downgraded', "
        "resolved_at = updated_at, kept = NULL WHERE state = 'open' AND EXISTS (SELECT 1 FROM "
        "reviews o WHERE o.record_id = reviews.record_id AND o.kind = reviews.kind AND "
        "o.state = 'open' AND o.id < reviews.id)"))
    op.drop_index(INDEX, "reviews")
    with op.batch_alter_table("reviews", recreate="auto") as t:
        t.drop_column("destination")
    _index(["record_id", "kind"])
