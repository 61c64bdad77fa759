"""A destination's serial ordering per key (issue 29, "Ordering per key", serial): each event of
a source whose destination orders `serial` keeps its key's digest, read from its body when it
is accepted (`hook_events.ordering_key`, domain/routing.ordering_key's "sha256:" and 64 hex
digits; null: not ordered), so the take can hold an event while an earlier one of its key is
queued or being forwarded (storage/take.py) without opening a sealed body. A held event is
parked out of the due range (next_attempt_at null) until the event before it settles. Two
indexes hold only the events that have a key: one is the take's look for an earlier event of
the key, the other finds the due ones to park and the parked ones.

A downgrade drops the column and the index, and the `ordering` of each source whose ordering is
serial (0017 refuses serial): a downgraded source forwards without an order per key.

Revision ID: 0018_serial
Revises: 0017_ordering
Create Date: 2026-12-12
"""
import json

import sqlalchemy as sa
from alembic import op

revision = "0018_serial"
down_revision = "0017_ordering"
branch_labels = None
depends_on = None

HAS_KEY = "ordering_key IS NOT NULL"
# the take's look for another event of a key; the sweep's for queued keyed events to park
# (due) or to let go (parked: null), which has no state column, so the planner never takes
# it for the take's look (it would read every queued keyed event of every source)
INDEXES = {"ix_hook_events_serial": (["source_id", "ordering_key", "state", "id"], HAS_KEY),
           "ix_hook_events_keyed": (["next_attempt_at", "id"],
                                    f"{HAS_KEY} AND state = 'queued'")}


def upgrade() -> None:
    op.add_column("hook_events", sa.Column("ordering_key", sa.String(71), nullable=True))
    for name, (columns, where) in INDEXES.items():
        op.create_index(name, "hook_events", columns, postgresql_where=sa.text(where),
                        sqlite_where=sa.text(where))


def downgrade() -> None:
    for name in INDEXES:
        op.drop_index(name, table_name="hook_events")
    # a parked event (held, so without a next attempt) is due again
    op.execute(sa.text("UPDATE hook_events SET next_attempt_at = received_at "
                       "WHERE state = 'queued' AND next_attempt_at IS NULL"))
    with op.batch_alter_table("hook_events", recreate="auto") as b:
        b.drop_column("ordering_key")
    conn = op.get_bind()
    for sid, text in conn.execute(sa.text("SELECT id, config FROM hook_sources")).all():
        config = json.loads(text)
        if config.get("forward", {}).get("ordering", {}).get("mode") == "serial":
            config["forward"].pop("ordering")
            conn.execute(sa.text("UPDATE hook_sources SET config = :c WHERE id = :i"),
                         {"c": json.dumps(config), "i": sid})
