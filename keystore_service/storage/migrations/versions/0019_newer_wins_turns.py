"""A newer_wins destination's events of one key go one at a time (issue 29, "Ordering per
key"): before, two events of a key taken together were both forwarded, each compared with the
version delivered before either, and the destination could get the older one last. Each event
of an ordered destination now keeps its key's digest (`ordering_key`, as serial's since 0018)
and the mode it was accepted under (`ordering_mode`: 'serial' or 'newer_wins'), which the take
reads: under newer_wins an event waits while another of its key is being forwarded or an
earlier one of its key is due, but not while an earlier one waits for its retry (that one is
superseded at its turn if a newer one was delivered meanwhile).

The events keyed before this migration are serial's (0018 keyed no other); events of
newer_wins destinations accepted before it have no key and are not held, as before (a sealed
body cannot be read here).

A downgrade forgets the newer_wins events' keys (0018 would hold them as serial), lets their
parked ones go, and drops the column.

Revision ID: 0019_newer_wins_turns
Revises: 0018_serial
Create Date: 2026-12-13
"""
import sqlalchemy as sa
from alembic import op

revision = "0019_newer_wins_turns"
down_revision = "0018_serial"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("hook_events", sa.Column("ordering_mode", sa.String(10), nullable=True))
    op.execute(sa.text("UPDATE hook_events SET ordering_mode = 'serial' "
                       "WHERE ordering_key IS NOT NULL"))


def downgrade() -> None:
    op.execute(sa.text(
        "UPDATE hook_events SET ordering_key = NULL, next_attempt_at = CASE WHEN state = "
        "'queued' AND next_attempt_at IS NULL THEN received_at ELSE next_attempt_at END "
        "WHERE ordering_mode = 'newer_wins'"))
    with op.batch_alter_table("hook_events", recreate="auto") as b:
        b.drop_column("ordering_mode")
