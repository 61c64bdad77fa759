"""The tables of a source's destinations and their routing (issue 29: "Ordering per key",
migration 0017; destinations, 0020). On the same `metadata` as tables.py, which imports this
module at its end."""
from __future__ import annotations

from sqlalchemy import BigInteger, CheckConstraint, Column, ForeignKey, Integer, \
    PrimaryKeyConstraint, String, Table, Text, UniqueConstraint

from keystore_service.storage.tables import Id, exact_text, metadata

# A source's destination: where its events go (its headers and secret sealed in its own
# `sealed`, or in the source's; its forwarding options in its `config`, or in the source's
# config `forward`), its limits,
# and where its forwarding is: a pause (a Retry-After's, `paused_until`; an operator's, since
# `operator_paused_at` until `operator_paused_until` if set, with its reason), its last
# error, a failing run and its next probe, the take's turn (`last_taken_at`, storage/take.py)
# and its rate as the take's GCRA reads it (microseconds between two forwards, null: no rate;
# the theoretical arrival time, null: no debt). The v1.1 `destination` is the source's one
# destination, `default`, at position 0 (migration 0020 made one for every source).
hook_destinations = Table(
    "hook_destinations", metadata,
    Column("id", Integer, primary_key=True),
    Column("tenant_id", Integer, ForeignKey("tenants.id"), nullable=False),  # docs/scaling.md
    Column("source_id", Integer, ForeignKey("hook_sources.id", ondelete="CASCADE"),
           nullable=False),
    Column("name", exact_text(64), nullable=False),
    Column("position", Integer, nullable=False),  # its place in the source's list, from 0
    Column("url", Text, nullable=False),
    Column("timeout_seconds", Integer, nullable=False),
    Column("max_in_flight", Integer, nullable=False),
    Column("paused_until", BigInteger, nullable=True),
    Column("last_error", Text, nullable=True),  # a short reason, never a body
    Column("last_error_at", BigInteger, nullable=True),
    Column("last_taken_at", BigInteger, nullable=True),
    Column("operator_paused_at", BigInteger, nullable=True),
    Column("operator_paused_until", BigInteger, nullable=True),
    Column("pause_reason", Text, nullable=True),
    Column("failing_since", BigInteger, nullable=True),
    Column("probe_at", BigInteger, nullable=True),
    Column("rate_interval_us", BigInteger, nullable=True),
    Column("rate_tat", BigInteger, nullable=True),
    # 0023: a destination's own forwarding options (JSON, as a source's config `forward`)
    # and its sealed {headers, destination_secret}; null: its source's (the v1.1 one's)
    Column("config", Text, nullable=True),
    Column("sealed", Text, nullable=True),
    UniqueConstraint("tenant_id", "source_id", "name"),  # tenant_id: docs/scaling.md, rule 1
    UniqueConstraint("tenant_id", "source_id", "position"),
    CheckConstraint("length(name) BETWEEN 1 AND 64", name="name_length"),
    CheckConstraint("position BETWEEN 0 AND 9", name="position"),
    CheckConstraint("timeout_seconds BETWEEN 1 AND 60 AND max_in_flight >= 1", name="limits"),
    CheckConstraint("rate_interval_us IS NULL OR rate_interval_us >= 1", name="rate"),
)

# The last delivered version of each key of a destination that orders newer_wins (by
# destination since 0022: each destination compares with what it delivered):
# written in the transaction that records an event delivered, only when it is newer
# (storage/versions.py), so it never goes back. `ordering_key` is routing.ordering_key's
# "sha256:" and 64 hex digits (71 characters whatever the key's size); `version` the
# version's canonical JSON (numbers exact, whatever their size).
hook_versions = Table(
    "hook_versions", metadata,
    Column("tenant_id", Integer, ForeignKey("tenants.id"), nullable=False),  # docs/scaling.md
    Column("destination_id", Integer, ForeignKey("hook_destinations.id", ondelete="CASCADE"),
           nullable=False),
    Column("ordering_key", String(71), nullable=False),
    Column("version", Text, nullable=False),
    Column("event_pk", Id, nullable=False),  # the delivered event (its id is shown as `by`)
    Column("at", BigInteger, nullable=False),  # when it was delivered
    PrimaryKeyConstraint("destination_id", "ordering_key"),
)
