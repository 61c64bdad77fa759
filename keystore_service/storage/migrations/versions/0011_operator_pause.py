"""The gateway's recovery and operator controls (issue 27, "Recovery and control"): an
operator's pause of a source, apart from a destination's Retry-After pause (`paused_until`):
when it began (`operator_paused_at`, non-null while paused; the paused time is added to the
retry windows of the source's events when it ends), when it ends by itself
(`operator_paused_until`, null: until resumed) and why (`pause_reason`); and the probe of a
failing destination: since when its forwards fail (`failing_since`, cleared by a success,
which makes every waiting event due) and when its oldest waiting event is next tried
whatever its backoff says (`probe_at`). The events get an index by (source, state, received
at) so that a source's oldest queued event is one index step, not a read of its queue.

Revision ID: 0011_operator_pause
Revises: 0010_sealing_check
Create Date: 2026-12-02
"""
import sqlalchemy as sa
from alembic import op

revision = "0011_operator_pause"
down_revision = "0010_sealing_check"
branch_labels = None
depends_on = None

_COLUMNS = ("operator_paused_at", "operator_paused_until", "pause_reason", "failing_since",
            "probe_at")


def upgrade() -> None:
    op.add_column("hook_sources", sa.Column("operator_paused_at", sa.BigInteger, nullable=True))
    op.add_column("hook_sources", sa.Column("operator_paused_until", sa.BigInteger,
                                            nullable=True))
    op.add_column("hook_sources", sa.Column("pause_reason", sa.Text, nullable=True))
    op.add_column("hook_sources", sa.Column("failing_since", sa.BigInteger, nullable=True))
    op.add_column("hook_sources", sa.Column("probe_at", sa.BigInteger, nullable=True))
    op.create_index("ix_hook_events_source_id_state_received_at", "hook_events",
                    ["source_id", "state", "received_at"])


def downgrade() -> None:
    op.drop_index("ix_hook_events_source_id_state_received_at", "hook_events")
    with op.batch_alter_table("hook_sources") as b:
        for name in reversed(_COLUMNS):
            b.drop_column(name)
