from __future__ import annotations

import pytest

from keystore_service.app import create_app
from keystore_service.settings import Settings
from tests.support import T0


class Http:
    """Flask's test client with a token: (status, json, headers) from every call."""

    def __init__(self, client, token: str):
        self.client, self.token = client, token

    def _auth(self, token):
        token = self.token if token is ... else token
        return {"Authorization": f"Bearer {token}"} if token else {}

    def post(self, path, body=None, *, token=..., raw=None, headers=None):
        kwargs = {"data": raw} if raw is not None else {"json": body}
        r = self.client.post(path, headers={**self._auth(token), **(headers or {})}, **kwargs)
        return r.status_code, r.get_json(silent=True), r.headers

    def get(self, path, *, token=..., **params):
        r = self.client.get(path, query_string=params, headers=self._auth(token))
        return r.status_code, r.get_json(silent=True), r.headers


@pytest.fixture
def app(database_url, clock):
    application = create_app(Settings(database_url=database_url), clock)
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
