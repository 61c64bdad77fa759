from __future__ import annotations

import time

import pytest
import requests

from tests.faults.harness import PrivatePostgres
from tests.support import EffectSink, new_token

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
    """The stored record, or None when the service says there is none (404). Any other
    answer is not evidence about the record: a 503 is asked again (and counted in
    `lookup.unavailable`), anything else fails the test."""
    session = requests.Session()

    def lookup(key: str, scope: str = "invoice"):
        for _ in range(50):
            r = session.get(url + "/v1/keys", params={"scope": scope, "key": key},
                            headers={"Authorization": f"Bearer {token}"}, timeout=10)
            if r.status_code == 200:
                return r.json()["record"]
            if r.status_code == 404:
                return None
            assert r.status_code == 503, (r.status_code, r.text[:300])
            lookup.unavailable += 1
            time.sleep(0.2)
        raise AssertionError(f"no answer for {key} after 50 tries")
    lookup.unavailable = 0
    return lookup


@pytest.fixture
def tenant_token():
    return lambda url, tenant="faults": new_token(url, tenant)
