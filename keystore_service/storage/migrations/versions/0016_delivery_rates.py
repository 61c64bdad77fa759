"""A destination's delivery rate (issue 29, "Rates per destination"): the rate a source's
destination is fed at, held across relays by the take (storage/take.py) as a GCRA on the
source's row. `rate_interval_us`: microseconds between two forwards at the rate (per / count;
null: no rate), written with the destination (its API form is options["forward"]["rate"]);
`rate_tat`: the rate's theoretical arrival time, when the next forward is due if the
destination had no burst (null: no debt).

A downgrade drops both columns and the `rate` from each source's forward options, which 0015
does not know: a downgraded source forwards unpaced, and an upgrade again finds none.

Revision ID: 0016_delivery_rates
Revises: 0015_filtered_events
Create Date: 2026-12-10
"""
import json

import sqlalchemy as sa
from alembic import op

revision = "0016_delivery_rates"
down_revision = "0015_filtered_events"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # SQLite rebuilds the table for the CHECK; a batch keeps its indexes and rows.
    with op.batch_alter_table("hook_sources", recreate="auto") as b:
        b.add_column(sa.Column("rate_interval_us", sa.BigInteger, nullable=True))
        b.add_column(sa.Column("rate_tat", sa.BigInteger, nullable=True))
        b.create_check_constraint("ck_hook_sources_rate",
                                  "rate_interval_us IS NULL OR rate_interval_us >= 1")


def downgrade() -> None:
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT id, config FROM hook_sources "
                                "WHERE rate_interval_us IS NOT NULL")).all()
    for sid, text in rows:
        config = json.loads(text)
        config.get("forward", {}).pop("rate", None)
        conn.execute(sa.text("UPDATE hook_sources SET config = :c WHERE id = :i"),
                     {"c": json.dumps(config), "i": sid})
    with op.batch_alter_table("hook_sources", recreate="auto") as b:
        b.drop_constraint("ck_hook_sources_rate", type_="check")
        b.drop_column("rate_tat")
        b.drop_column("rate_interval_us")
