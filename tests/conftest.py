"""Backends for every test that touches a database: a fresh SQLite file, and PostgreSQL.

PostgreSQL is required, never skipped: without it the session fails with a clear message.
Each test session works in a database of its own, created here and dropped at the end.
Deselect with `-m "not postgres"` only on a machine that has no PostgreSQL at all.
"""
from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

import psycopg
import pytest
from hypothesis import settings as hypothesis_settings
from sqlalchemy.engine import make_url

from keystore_service import bootstrap
from keystore_service.app import create_app
from keystore_service.settings import Settings
from keystore_service.storage import migrate
from tests.support import T0, FakeClock, Http

# No per-example deadline: these machines are shared (two cores, helpers and CI jobs beside
# the tests), and a 316 ms example of a 200 ms deadline is noise, not a finding. Speed is
# measured in bench/, never in tests.
hypothesis_settings.register_profile("shared-machine", deadline=None)
hypothesis_settings.load_profile("shared-machine")

TEST_KEY = "cNk6cVlTCFCk0NKWaFUBSi1_dBbOG9Z-mUbGkN9yQBw="  # seals webhook sources' secrets

PG_ADMIN_URL = os.environ.get("KEYSTORE_TEST_POSTGRES_URL",
                              "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture(scope="session")
def pg_admin():
    try:
        conn = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL is required at {PG_ADMIN_URL} (KEYSTORE_TEST_POSTGRES_URL): "
                    f"{exc}", pytrace=False)
    yield conn
    conn.close()


@pytest.fixture(scope="session")
def pg_database(pg_admin):
    """A factory of migrated PostgreSQL databases of this session's own, dropped at the end."""
    created = []

    def make(label: str = "") -> str:
        name = f"keystore_test_{os.getpid()}_{secrets.token_hex(3)}{label}"
        pg_admin.execute(f'CREATE DATABASE "{name}"')
        created.append(name)
        url = make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
        migrate.upgrade(url)
        return url
    yield make
    for name in created:
        pg_admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_url(pg_database):
    """The session's shared PostgreSQL database (emptied before each test that uses it)."""
    return pg_database()


def truncate_pg(url: str) -> None:
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute("TRUNCATE attempts, reviews, resolutions, records, tokens, tenants, "
                     "job_locks, rate_limits, report_counts, lease_expiries, hook_attempts, "
                     "hook_events, hook_sources, hook_destinations, ui_sessions, late_traces, "
                     "late_repeats, "
                     "kept_payloads, sealing_check "
                     "RESTART IDENTITY CASCADE")


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> Path:
    """One migrated SQLite file; each test gets a copy (migrating per test costs 0.3 s)."""
    path = tmp_path_factory.mktemp("template") / "keystore.db"
    migrate.upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request, tmp_path):
    """A migrated, empty database on each backend."""
    if request.param == "sqlite":
        path = tmp_path / "keystore.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite:///{path}"
    url = request.getfixturevalue("pg_url")
    truncate_pg(url)
    return url


@pytest.fixture
def backend(database_url) -> str:
    return "sqlite" if database_url.startswith("sqlite") else "postgres"


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def ks(database_url, clock):
    """The wired key store (service, accounts, auth) on a test clock."""
    keystore = bootstrap.build(Settings(database_url=database_url, secret_key=TEST_KEY), clock)
    yield keystore
    keystore.database.engine.dispose()


@pytest.fixture
def tenant_id(ks) -> int:
    return ks.accounts.create_tenant("acme", T0)


# --- the app over Flask's test client, with tokens of two tenants ---------------------------

@pytest.fixture
def app(database_url, clock):
    application = create_app(Settings(database_url=database_url, secret_key=TEST_KEY), clock)
    yield application
    application.extensions["keystore"].database.engine.dispose()


@pytest.fixture
def tokens(app):
    accounts = app.extensions["keystore"].accounts
    for tenant in ("acme", "globex"):
        accounts.create_tenant(tenant, T0)
    return {"acme": accounts.create_token("acme", "client", None, T0),
            "acme_operator": accounts.create_token("acme", "operator", None, T0),
            "globex": accounts.create_token("globex", "client", None, T0)}


@pytest.fixture
def http(app, tokens):
    return Http(app.test_client(), tokens["acme"])
