"""The gateway's fair take and bounded pauses (issue 25): a source's `max_pause_seconds`
(a Retry-After pause lasts at most this long), when a take last served it (`last_taken_at`,
the take's round robin), and its events indexed by (source, state, next attempt) so that a
take finds each source's oldest due events without reading another source's backlog (in
place of the (state, next attempt) index of the take before).

Revision ID: 0009_fair_take
Revises: 0008_late_repeats
Create Date: 2026-12-01
"""
import time

import sqlalchemy as sa
from alembic import op

revision = "0009_fair_take"
down_revision = "0008_late_repeats"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN with its CHECK on both backends: SQLite cannot add a table CHECK
    # without rebuilding hook_sources, which hook_events' foreign key points at.
    op.execute("ALTER TABLE hook_sources ADD COLUMN max_pause_seconds INTEGER NOT NULL "
               "DEFAULT 3600 CONSTRAINT ck_hook_sources_pause_limit "
               "CHECK (max_pause_seconds BETWEEN 1 AND 86400)")
    op.add_column("hook_sources", sa.Column("last_taken_at", sa.BigInteger, nullable=True))
    # A pause stored before the bound (one Retry-After paused a source until 2058) ends an
    # hour (the default bound) after the upgrade at the latest.
    cap = int(time.time() * 1_000_000) + 3600 * 1_000_000
    op.execute(sa.text("UPDATE hook_sources SET paused_until = :cap WHERE paused_until > :cap")
               .bindparams(cap=cap))
    op.create_index("ix_hook_events_source_id_state_next_attempt_at", "hook_events",
                    ["source_id", "state", "next_attempt_at"])
    op.drop_index("ix_hook_events_source_id_state", "hook_events")  # a prefix of the new one
    # The take no longer reads all due events in (state, next attempt) order; left in place,
    # PostgreSQL preferred it for each source's due events (its statistics see one source
    # with every event) and a take beside 1,000 idle sources cost ~300 ms instead of ~7.
    op.drop_index("ix_hook_events_state_next_attempt_at", "hook_events")


def downgrade() -> None:
    op.create_index("ix_hook_events_state_next_attempt_at", "hook_events",
                    ["state", "next_attempt_at"])
    op.create_index("ix_hook_events_source_id_state", "hook_events", ["source_id", "state"])
    op.drop_index("ix_hook_events_source_id_state_next_attempt_at", "hook_events")
    with op.batch_alter_table("hook_sources") as b:
        b.drop_column("last_taken_at")
        b.drop_column("max_pause_seconds")
