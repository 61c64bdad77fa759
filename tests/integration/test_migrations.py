"""The migrations create what tables.py describes, and enforce the rules themselves."""
from __future__ import annotations

import time

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, insert
from sqlalchemy.exc import DataError, IntegrityError

from keystore_service.storage import migrate
from keystore_service.storage.db import normalise_url
from keystore_service.storage.tables import metadata, records, tenants

HOUR = 3600 * 1_000_000


@pytest.fixture
def engine(database_url):
    e = create_engine(normalise_url(database_url))
    yield e
    e.dispose()


def test_the_migrated_schema_matches_the_table_definitions(engine):
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    assert diff == []


def test_upgrade_is_idempotent(database_url):
    assert migrate.upgrade(database_url) == migrate.upgrade(database_url) == migrate.head()


def row(**over):
    base = dict(tenant_id=1, scope="s", key="k", state="in_progress", fingerprint=None,
                attempt=1, incarnation=1, lease_token_hash="h", lease_acquired_at=0,
                lease_expires_at=1, on_stale="reconcile", first_seen_at=0, last_seen_at=0,
                expires_at=1, duplicate_count=0)
    base.update(over)
    return base


@pytest.mark.parametrize("bad", [
    {"scope": ""}, {"scope": "s" * 129}, {"scope": "has space"}, {"key": ""},
    {"key": "k" * 513}, {"state": "done"}, {"on_stale": "never"}, {"attempt": 0},
    {"lease_expires_at": None}, {"tenant_id": None}, {"key": None}, {"fingerprint": ""},
])
def test_the_database_refuses_rows_that_break_the_rules(engine, bad):
    with engine.begin() as conn:
        conn.execute(insert(tenants).values(id=1, name="t", created_at=0))
    with pytest.raises((IntegrityError, DataError)), engine.begin() as conn:  # PG: too long
        conn.execute(insert(records).values(row(**bad)))


def test_the_unique_constraint_and_exact_key_comparison(engine):
    with engine.begin() as conn:
        conn.execute(insert(tenants).values(id=1, name="t", created_at=0))
        for key in ("Key", "key", "key ", "kéy", "ke\u0301y"):  # case, space, NFC vs NFD
            conn.execute(insert(records).values(row(key=key)))
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(insert(records).values(row(key="key")))


def test_upgrading_from_0001_keeps_the_records(tmp_path):
    from alembic import command
    from sqlalchemy import select, text

    url = f"sqlite:///{tmp_path}/old.db"
    engine = create_engine(url)
    with engine.begin() as conn:
        cfg = migrate._config()
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
        conn.execute(text("INSERT INTO tenants (id, name, created_at) VALUES (1, 't', 0)"))
        conn.execute(text(
            "INSERT INTO records (tenant_id, scope, key, state, attempt, incarnation, on_stale, "
            "first_seen_at, last_seen_at, expires_at, duplicate_count, result) VALUES "
            "(1, 's', 'k', 'succeeded', 1, 1, 'retry', 0, 0, 9, 3, '{}')"))
    engine.dispose()
    assert migrate.upgrade(url) == migrate.head()
    engine = create_engine(url)
    with engine.connect() as conn:
        row = conn.execute(select(records)).one()
    engine.dispose()
    assert (row.key, row.duplicate_count, row.version_kind, row.version) == ("k", 3, None, None)


def test_an_upgrade_cuts_a_pause_stored_before_the_bound(tmp_path):
    """A source paused until 2058 by a Retry-After before the bound existed is paused for
    an hour after the upgrade at most (migration 0009)."""
    from alembic import command
    from sqlalchemy import create_engine, text

    url = f"sqlite:///{tmp_path}/old.db"
    engine = create_engine(url)
    with engine.begin() as conn:
        cfg = migrate._config()
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0008_late_repeats")
        conn.execute(text("INSERT INTO tenants (id, name, created_at) VALUES (1, 't', 0)"))
        conn.execute(text(
            "INSERT INTO hook_sources (tenant_id, name, provider, ingest_hash, sealed, config, "
            "destination_url, timeout_seconds, ttl_seconds, retry_window_seconds, "
            "max_in_flight, keep_body_seconds, state, created_at, updated_at, paused_until) "
            "VALUES (1, 's', 'generic', 'h', 'x', '{}', 'http://127.0.0.1/', 10, 999999, 3600, "
            "4, 0, 'active', 0, 0, 2800000000000000)"))  # 2058
    engine.dispose()
    before = time.time()
    migrate.upgrade(url)
    engine = create_engine(url)
    with engine.connect() as conn:
        until, bound = conn.execute(text(
            "SELECT paused_until, max_pause_seconds FROM hook_sources")).one()
    engine.dispose()
    assert bound == 3600
    assert before * 1e6 + HOUR <= until <= time.time() * 1e6 + HOUR
