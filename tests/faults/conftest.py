from __future__ import annotations

import pytest
import requests

from tests.faults.harness import EffectSink, PrivatePostgres
from tests.support import new_token

pytestmark = pytest.mark.faults


@pytest.fixture
def sink():
    with EffectSink() as s:
        yield s


@pytest.fixture
def fenced_sink():
    with EffectSink(fenced=True) as s:
        yield s


@pytest.fixture
def private_pg():
    """A PostgreSQL cluster of this test's own (it will be stopped abruptly)."""
    pg = PrivatePostgres()
    pg.start()
    yield pg
    pg.destroy()


def lookup_via(url: str, token: str):
    session = requests.Session()

    def lookup(key: str, scope: str = "invoice"):
        r = session.get(url + "/v1/keys", params={"scope": scope, "key": key},
                        headers={"Authorization": f"Bearer {token}"}, timeout=10)
        return r.json()["record"] if r.status_code == 200 else None
    return lookup


@pytest.fixture
def tenant_token():
    return lambda url, tenant="faults": new_token(url, tenant)
