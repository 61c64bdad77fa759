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
from dataclasses import dataclass
from pathlib import Path

import pytest
from keystore_client import KeyStore
from sqlalchemy.engine import make_url

from keystore_service import bootstrap
from keystore_service.service.claims import system_clock
from keystore_service.settings import Settings
from keystore_service.storage import migrate
from tests.conftest import PG_ADMIN_URL
from tests.support import Server

from .sink import EffectSink

HERE = Path(__file__).parent
REPO = HERE.parent.parent


@dataclass(frozen=True)
class Service:
    backend: str
    url: str
    token: str  # a client token of tenant "clients"
    operator_token: str
    database_url: str


@pytest.fixture(scope="session")
def client_pg_url(pg_admin):
    name = f"keystore_clients_{os.getpid()}_{secrets.token_hex(3)}"
    pg_admin.execute(f'CREATE DATABASE "{name}"')
    yield make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    pg_admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session",
                params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def service(request, tmp_path_factory):
    """A running key store on each backend, with a client and an operator token."""
    if request.param == "sqlite":
        db_url = f"sqlite:///{tmp_path_factory.mktemp('clients')}/keystore.db"
    else:
        db_url = request.getfixturevalue("client_pg_url")
    token, operator = _tokens(db_url)
    log = tmp_path_factory.mktemp("logs") / f"keystore-{request.param}.log"
    server = Server(db_url, workers=2, threads=8, log_path=log).start()
    yield Service(request.param, server.url, token, operator, db_url)
    server.kill()  # a graceful stop waits ~5 s for idle keep-alive connections; nothing to save


def _tokens(db_url: str) -> tuple[str, str]:
    """A tenant with a client and an operator token, made with the service's own accounts
    code in-process (the `keystore` CLI would do the same, at ~2 s of start-up per call)."""
    migrate.upgrade(db_url)
    keystore = bootstrap.build(Settings(database_url=db_url))
    try:
        keystore.accounts.create_tenant("clients", system_clock())
        return tuple(keystore.accounts.create_token("clients", role, None, system_clock())
                     for role in ("client", "operator"))
    finally:
        keystore.database.engine.dispose()


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
    s = EffectSink().start()
    yield s
    s.stop()


@pytest.fixture
def effect(scope) -> str:
    """A sink name of this test's own."""
    return f"fx-{scope}"
