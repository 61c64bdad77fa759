"""The clients' tests run against a REAL `keystore serve` (gunicorn), one per backend, started
once per test session: SQLite in a temporary file, and PostgreSQL in a database of its own.

The PostgreSQL database is not the shared `pg_url` one: tests of the service truncate that one
(tokens and tenants included) between tests, which would pull the tokens from under a server
that lives for the whole session. Isolation between client tests comes from unique scopes.
"""
from __future__ import annotations

import os
import secrets
import uuid
from pathlib import Path

import pytest
from keystore_client import KeyStore
from sqlalchemy.engine import make_url

from keystore_service.service.claims import system_clock
from keystore_service.storage import migrate
from tests.conftest import PG_ADMIN_URL
from tests.gateway.support import KEY
from tests.support import EffectSink, Server, new_token

HERE = Path(__file__).parent
REPO = HERE.parent.parent

@pytest.fixture(scope="session")
def client_pg_url(pg_admin):
    name = f"keystore_clients_{os.getpid()}_{secrets.token_hex(3)}"
    pg_admin.execute(f'CREATE DATABASE "{name}"')
    yield make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    pg_admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session",
                params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def service(request, tmp_path_factory):
    """A running key store on each backend, with a client and an operator token of tenant
    "clients" (`service.token`, `service.operator_token`), its workers running the relay
    with a sealing key (so that connections and sends work on both backends)."""
    if request.param == "sqlite":
        db_url = f"sqlite:///{tmp_path_factory.mktemp('clients')}/keystore.db"
    else:
        db_url = request.getfixturevalue("client_pg_url")
    migrate.upgrade(db_url)
    log = tmp_path_factory.mktemp("logs") / f"keystore-{request.param}.log"
    server = Server(db_url, workers=2, threads=8, log_path=log,
                    env={"KEYSTORE_SECRET_KEY": KEY},
                    token=new_token(db_url, "clients", "client", now=system_clock()),
                    operator_token=new_token(db_url, "clients", "operator", now=system_clock()))
    yield server.start()
    server.kill()  # a graceful stop waits ~5 s for idle keep-alive connections; nothing to save


@pytest.fixture
def ks(service):
    with KeyStore(service.url, service.token) as client:
        yield client


@pytest.fixture
def operator(service):
    with KeyStore(service.url, service.operator_token) as client:
        yield client


@pytest.fixture
def scope() -> str:
    """A scope of this test's own: tests share one server and never see each other's keys."""
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def sink():
    with EffectSink() as s:
        yield s


@pytest.fixture
def effect(scope) -> str:
    """A sink name of this test's own."""
    return f"fx-{scope}"
