"""Per-token rate limits: off by default; on, counted across workers in the database."""
from __future__ import annotations

import pytest

from keystore_service.app import create_app
from keystore_service.settings import Settings
from tests.support import T0


@pytest.fixture
def limited(database_url, clock):
    app = create_app(Settings(database_url=database_url, rate_limit_requests=3,
                              rate_limit_window_seconds=60), clock)
    accounts = app.extensions["keystore"].accounts
    accounts.create_tenant("acme", T0)
    tokens = [accounts.create_token("acme", "client", None, T0) for _ in range(2)]
    yield app.test_client(), tokens
    app.extensions["keystore"].database.engine.dispose()


def claim(client, token, n):
    return client.post("/v1/claim", json={"scope": "s", "key": f"k{n}"},
                       headers={"Authorization": f"Bearer {token}"})


def test_over_the_limit_is_429_with_retry_after(limited, clock):
    client, (a, b) = limited
    clock.advance(20)  # 20 s into a 60 s window
    assert [claim(client, a, n).status_code for n in range(3)] == [201] * 3
    r = claim(client, a, 3)
    assert r.status_code == 429 and r.get_json()["error"]["code"] == "rate_limited"
    assert r.headers["Retry-After"] == str(60 - (clock.now // 1_000_000) % 60)
    assert claim(client, b, 4).status_code == 201  # per token
    clock.advance(60)
    assert claim(client, a, 5).status_code == 201  # a new window


def test_a_refused_request_writes_nothing(limited):
    client, (a, _) = limited
    for n in range(3):
        claim(client, a, n)
    assert claim(client, a, 99).status_code == 429
    r = client.get("/v1/keys", query_string={"scope": "s", "key": "k99"},
                   headers={"Authorization": f"Bearer {_}"})
    assert r.status_code == 404


def test_limits_are_off_by_default(http):
    assert all(http.post("/v1/claim", {"scope": "s", "key": f"k{n}"})[0] == 201
               for n in range(20))
