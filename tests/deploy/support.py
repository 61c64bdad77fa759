"""What the deployment tests share: the round a running service must answer wherever it
runs (the container, compose): claim, complete, and the replay."""
from __future__ import annotations

import requests


def claim_complete_replay(base: str, token: str, key: str) -> None:
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {token}"
    body = {"scope": "create_invoice", "key": key, "payload": {"amount": 1250}}
    r = s.post(base + "/v1/claim", json=body, timeout=10)
    assert r.status_code == 201, r.text
    r = s.post(base + "/v1/complete", timeout=10, json={
        "scope": "create_invoice", "key": key, "lease_token": r.json()["lease_token"],
        "state": "succeeded", "result": {"resource_id": f"INV-{key}"}})
    assert r.status_code == 200, r.text
    replay(base, token, key)


def replay(base: str, token: str, key: str) -> None:
    r = requests.post(base + "/v1/claim", timeout=10, headers={"Authorization": f"Bearer {token}"},
                      json={"scope": "create_invoice", "key": key, "payload": {"amount": 1250}})
    assert (r.status_code, r.headers.get("Idempotent-Replayed")) == (200, "true"), r.text
    assert r.json()["record"]["result"]["resource_id"] == f"INV-{key}"
