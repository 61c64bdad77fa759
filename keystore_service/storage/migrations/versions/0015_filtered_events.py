"""A destination's filter (issue 29, first part): `hook_events.state` may hold `filtered`,
an event the destination's filter does not take (nothing was sent, its record succeeded).

A downgrade makes each filtered event `delivered`, the nearest state 0014 knows: settled,
its record succeeded with {"filtered": true}, nothing left to do (its delivered_at stays
null: nothing was delivered). 0014 redelivers it with force, as any delivered event.

Revision ID: 0015_filtered_events
Revises: 0014_sends
Create Date: 2026-12-09
"""
import sqlalchemy as sa
from alembic import op

revision = "0015_filtered_events"
down_revision = "0014_sends"
branch_labels = None
depends_on = None

# As of this revision (domain/deliveries.DeliveryState), frozen as released.
OLD_STATES = "('queued', 'delivering', 'delivered', 'failed')"
STATES = "('queued', 'delivering', 'delivered', 'failed', 'filtered')"


def upgrade() -> None:
    _states(STATES)


def downgrade() -> None:
    op.execute(sa.text("UPDATE hook_events SET state = 'delivered' WHERE state = 'filtered'"))
    _states(OLD_STATES)


def _states(states: str) -> None:
    # SQLite rebuilds the table to change a CHECK (its indexes are plain ones, which the
    # batch copies); the migrations' connection leaves foreign keys off, so hook_attempts'
    # rows stay while hook_events is copied, dropped and renamed.
    with op.batch_alter_table("hook_events", recreate="auto") as b:
        b.drop_constraint("ck_hook_events_state", type_="check")
        b.create_check_constraint("ck_hook_events_state", f"state IN {states}")
