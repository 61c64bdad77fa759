"""What the migration tests share: a record's row and a migration to a revision (a database
of a test's own that it may migrate down is the fixture own_url, conftest.py)."""
from __future__ import annotations

from sqlalchemy import create_engine

from keystore_service.storage import migrate
from keystore_service.storage.db import normalise_url


def row(**over):
    base = dict(tenant_id=1, scope="s", key="k", state="in_progress", fingerprint=None,
                attempt=1, incarnation=1, lease_token_hash="h", lease_acquired_at=0,
                lease_expires_at=1, on_stale="reconcile", first_seen_at=0, last_seen_at=0,
                expires_at=1, duplicate_count=0)
    base.update(over)
    return base


def to_revision(url: str, revision: str, down: bool = False) -> None:
    from alembic import command
    engine = create_engine(normalise_url(url))
    with engine.begin() as conn:
        cfg = migrate._config()
        cfg.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(cfg, revision)
    engine.dispose()
