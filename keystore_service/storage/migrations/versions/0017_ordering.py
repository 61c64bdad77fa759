"""A destination's ordering per key (issue 29, "Ordering per key", newer_wins): an event
whose version is not newer than the last delivered one of its key is `superseded`, a state
of `hook_events`, and `hook_versions` keeps that last delivered version per (source, key):
the key's fixed-length digest (domain/routing.ordering_key), the version as canonical JSON,
the event that carried it and when it was delivered.

A downgrade makes each superseded event `delivered`, the nearest state 0016 knows, as 0015's
does for filtered ones (settled, its record succeeded with {"superseded": true, ...},
delivered_at still null: nothing was delivered); it drops hook_versions and the `ordering`
of each source's forward options (0016 knows none): a downgraded source forwards every event,
and an upgrade again finds no ordering and no stored version.

Revision ID: 0017_ordering
Revises: 0016_delivery_rates
Create Date: 2026-12-11
"""
import json

import sqlalchemy as sa
from alembic import op

revision = "0017_ordering"
down_revision = "0016_delivery_rates"
branch_labels = None
depends_on = None

# As of this revision (domain/deliveries.DeliveryState), frozen as released.
OLD_STATES = "('queued', 'delivering', 'delivered', 'failed', 'filtered')"
STATES = "('queued', 'delivering', 'delivered', 'failed', 'filtered', 'superseded')"
Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    _states(STATES)
    op.create_table(
        "hook_versions",
        sa.Column("tenant_id", sa.Integer, sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("source_id", sa.Integer, sa.ForeignKey("hook_sources.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("ordering_key", sa.String(71), nullable=False),
        sa.Column("version", sa.Text, nullable=False),
        sa.Column("event_pk", Id, nullable=False),
        sa.Column("at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("source_id", "ordering_key", name="pk_hook_versions"))


def downgrade() -> None:
    op.drop_table("hook_versions")
    op.execute(sa.text("UPDATE hook_events SET state = 'delivered' WHERE state = 'superseded'"))
    _states(OLD_STATES)
    conn = op.get_bind()
    for sid, text in conn.execute(sa.text("SELECT id, config FROM hook_sources")).all():
        config = json.loads(text)
        if "ordering" in config.get("forward", {}):
            config["forward"].pop("ordering")
            conn.execute(sa.text("UPDATE hook_sources SET config = :c WHERE id = :i"),
                         {"c": json.dumps(config), "i": sid})


def _states(states: str) -> None:
    # As 0015: SQLite rebuilds the table to change a CHECK, its rows and indexes kept.
    with op.batch_alter_table("hook_events", recreate="auto") as b:
        b.drop_constraint("ck_hook_events_state", type_="check")
        b.create_check_constraint("ck_hook_events_state", f"state IN {states}")
