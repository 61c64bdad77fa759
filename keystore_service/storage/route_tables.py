"""The tables of a destination's routing (issue 29, "Ordering per key"; migration 0017). On
the same `metadata` as tables.py, which imports this module at its end."""
from __future__ import annotations

from sqlalchemy import BigInteger, Column, ForeignKey, Integer, PrimaryKeyConstraint, String, \
    Table, Text

from keystore_service.storage.tables import Id, metadata

# The last delivered version of each key of a source whose destination orders newer_wins:
# written in the transaction that records an event delivered, only when it is newer
# (storage/versions.py), so it never goes back. `ordering_key` is routing.ordering_key's
# "sha256:" and 64 hex digits (71 characters whatever the key's size); `version` the
# version's canonical JSON (numbers exact, whatever their size).
hook_versions = Table(
    "hook_versions", metadata,
    Column("tenant_id", Integer, ForeignKey("tenants.id"), nullable=False),  # docs/scaling.md
    Column("source_id", Integer, ForeignKey("hook_sources.id", ondelete="CASCADE"),
           nullable=False),
    Column("ordering_key", String(71), nullable=False),
    Column("version", Text, nullable=False),
    Column("event_pk", Id, nullable=False),  # the delivered event (its id is shown as `by`)
    Column("at", BigInteger, nullable=False),  # when it was delivered
    PrimaryKeyConstraint("source_id", "ordering_key"),
)
