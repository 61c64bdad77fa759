"""A source's destination becomes a row of its own (issue 29, "Routing: several
destinations"): `hook_destinations` holds what was the source's destination (its URL,
timeout and max_in_flight) and where its forwarding is (the pauses, the last error, the
failing run and its probe, the take's turn, the rate's GCRA), so that a source can have
several, each paused, probed, rated and served in turn on its own. Every source gets its one
destination, `default`, at position 0, with those values; the columns leave hook_sources.

A downgrade puts the first destination's values back on its source and drops the table.

Revision ID: 0020_destinations
Revises: 0019_newer_wins_turns
Create Date: 2026-12-14
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0020_destinations"
down_revision = "0019_newer_wins_turns"
branch_labels = None
depends_on = None

# (the source's column, the destination's), in hook_sources' order
MOVED = [("destination_url", "url"), ("timeout_seconds", "timeout_seconds"),
         ("max_in_flight", "max_in_flight"), ("paused_until", "paused_until"),
         ("last_error", "last_error"), ("last_error_at", "last_error_at"),
         ("last_taken_at", "last_taken_at"), ("operator_paused_at", "operator_paused_at"),
         ("operator_paused_until", "operator_paused_until"), ("pause_reason", "pause_reason"),
         ("failing_since", "failing_since"), ("probe_at", "probe_at"),
         ("rate_interval_us", "rate_interval_us"), ("rate_tat", "rate_tat")]
NOT_NULL = {"destination_url": sa.Text, "timeout_seconds": sa.Integer,
            "max_in_flight": sa.Integer}
TYPES = {"last_error": sa.Text, "pause_reason": sa.Text}  # the others are BigInteger
LIMITS = ("timeout_seconds BETWEEN 1 AND 60 AND max_in_flight >= 1 AND "
          "ttl_seconds >= 1 AND retry_window_seconds >= 1")


def upgrade() -> None:
    b = sa.BigInteger
    op.create_table(
        "hook_destinations",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("source_id", sa.Integer, sa.ForeignKey("hook_sources.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("name", sa.String(64).with_variant(
            postgresql.VARCHAR(64, collation="C"), "postgresql"), nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("timeout_seconds", sa.Integer, nullable=False),
        sa.Column("max_in_flight", sa.Integer, nullable=False),
        *(sa.Column(new, TYPES.get(new, b), nullable=True) for _, new in MOVED[3:]),
        sa.UniqueConstraint("tenant_id", "source_id", "name",
                            name="uq_hook_destinations_tenant_id_source_id_name"),
        sa.UniqueConstraint("tenant_id", "source_id", "position",
                            name="uq_hook_destinations_tenant_id_source_id_position"),
        sa.CheckConstraint("length(name) BETWEEN 1 AND 64",
                           name="ck_hook_destinations_name_length"),
        sa.CheckConstraint("position BETWEEN 0 AND 9", name="ck_hook_destinations_position"),
        sa.CheckConstraint("timeout_seconds BETWEEN 1 AND 60 AND max_in_flight >= 1",
                           name="ck_hook_destinations_limits"),
        sa.CheckConstraint("rate_interval_us IS NULL OR rate_interval_us >= 1",
                           name="ck_hook_destinations_rate"))
    old = ", ".join(o for o, _ in MOVED)
    new = ", ".join(n for _, n in MOVED)
    op.execute(sa.text(f"INSERT INTO hook_destinations (tenant_id, source_id, name, position, "
                       f"{new}) SELECT tenant_id, id, 'default', 0, {old} FROM hook_sources"))
    with op.batch_alter_table("hook_sources", recreate="auto") as t:
        t.drop_constraint("ck_hook_sources_rate", type_="check")
        t.drop_constraint("ck_hook_sources_limits", type_="check")
        for column, _ in MOVED:
            t.drop_column(column)
        t.create_check_constraint("ck_hook_sources_limits",
                                  "ttl_seconds >= 1 AND retry_window_seconds >= 1")


def downgrade() -> None:
    with op.batch_alter_table("hook_sources", recreate="auto") as t:
        for column, _ in MOVED:
            kind = NOT_NULL.get(column) or TYPES.get(column, sa.BigInteger)
            t.add_column(sa.Column(column, kind, nullable=True))
    for column, dest in MOVED:
        op.execute(sa.text(
            f"UPDATE hook_sources SET {column} = (SELECT d.{dest} FROM hook_destinations d "
            "WHERE d.source_id = hook_sources.id AND d.position = 0)"))
    with op.batch_alter_table("hook_sources", recreate="auto") as t:
        for column, kind in NOT_NULL.items():
            t.alter_column(column, existing_type=kind(), nullable=False)
        t.drop_constraint("ck_hook_sources_limits", type_="check")
        t.create_check_constraint("ck_hook_sources_limits", LIMITS)
        t.create_check_constraint("ck_hook_sources_rate",
                                  "rate_interval_us IS NULL OR rate_interval_us >= 1")
    op.drop_table("hook_destinations")
