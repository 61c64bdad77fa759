"""HTTP helpers that answer (status, json body, headers): `Api` over the network to a real
server, `Http` over Flask's test client."""
from __future__ import annotations

from typing import Optional

import requests


class Api:
    """A thin HTTP helper for tests: every call returns (status, json body, headers)."""

    def __init__(self, base: str, token: str, session: Optional[requests.Session] = None):
        self.base, self.session = base, session or requests.Session()
        self.headers = {"Authorization": f"Bearer {token}"}

    def post(self, path: str, body: dict):
        r = self.session.post(self.base + path, json=body, headers=self.headers, timeout=30)
        return r.status_code, r.json(), r.headers

    def get(self, path: str, **params):
        r = self.session.get(self.base + path, params=params, headers=self.headers, timeout=60)
        return r.status_code, r.json(), r.headers


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

    def patch(self, path, body=None, *, token=...):
        r = self.client.patch(path, json=body, headers=self._auth(token))
        return r.status_code, r.get_json(silent=True), r.headers

    def get(self, path, *, token=..., **params):
        r = self.client.get(path, query_string=params, headers=self._auth(token))
        return r.status_code, r.get_json(silent=True), r.headers
