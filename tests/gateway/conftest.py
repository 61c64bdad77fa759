"""Fixtures of the gateway's tests: the app with a secret key, a test provider, a sink."""
from __future__ import annotations

import time

import pytest

from keystore_service.app import create_app
from keystore_service.settings import Settings
from tests.e2e.conftest import e2e_url  # noqa: F401 (a database per module, both backends)
from tests.support import T0, Http

from .support import KEY, Sink, register


@pytest.fixture(autouse=True, scope="session")
def testing_provider():
    register()


@pytest.fixture
def gw_app(database_url, clock):
    app = create_app(Settings(database_url=database_url, secret_key=KEY,
                              token_cache_seconds=0), clock)
    yield app
    app.extensions["keystore"].database.engine.dispose()


@pytest.fixture
def op(gw_app):
    accounts = gw_app.extensions["keystore"].accounts
    accounts.create_tenant("acme", T0)
    accounts.create_tenant("globex", T0)
    return {"operator": accounts.create_token("acme", "operator", None, T0),
            "client": accounts.create_token("acme", "client", None, T0),
            "globex": accounts.create_token("globex", "operator", None, T0)}


@pytest.fixture
def gw(gw_app, op):
    return Http(gw_app.test_client(), op["operator"])


@pytest.fixture
def sink():
    s = Sink()
    yield s
    s.close()


@pytest.fixture
def sinks():
    """Two sinks on loopback: the destinations of a source with several."""
    made = [Sink(), Sink()]
    yield made
    for s in made:
        s.close()


@pytest.fixture
def forwarding(gw_app):
    return gw_app.extensions["keystore"].gateway.forwarding


@pytest.fixture
def live(database_url):
    """The app on the real clock (its relay is started by the test), two tenants, acme and
    globex, each with an operator; no per-source rate (a backlog is accepted as fast as the
    test client sends it)."""
    app = create_app(Settings(database_url=database_url, secret_key=KEY,
                              token_cache_seconds=0, hook_rate_limit_per_second=0))
    ks = app.extensions["keystore"]
    now = int(time.time() * 1_000_000)
    tokens = {}
    for tenant in ("acme", "globex"):
        ks.accounts.create_tenant(tenant, now)
        tokens[tenant] = ks.accounts.create_token(tenant, "operator", None, now)
    yield app, {t: Http(app.test_client(), tok) for t, tok in tokens.items()}
    if ks.gateway.relay is not None:
        ks.gateway.relay.stop(wait=5)
    ks.database.engine.dispose()
