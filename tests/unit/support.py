"""What the unit tests of the domain share: a stored record with every field set, changed
by keyword."""
from __future__ import annotations

from keystore_service.domain import records as domain
from tests.support import SECOND, T0

H = "a" * 64  # the current lease token's hash


def rec(**kw) -> domain.Record:
    base = dict(id=1, tenant_id=1, scope="s", key="k", state="in_progress", fingerprint="fp1",
                attempt=1, incarnation=1, lease_token_hash=H, lease_acquired_at=T0,
                lease_expires_at=T0 + 300 * SECOND, on_stale="reconcile", first_seen_at=T0,
                last_seen_at=T0, expires_at=T0 + 3600 * SECOND, duplicate_count=0,
                checkpoint_step=None, checkpoint_resource_id=None, checkpoint_at=None,
                result=None)
    base.update(kw)
    return domain.Record(**base)
