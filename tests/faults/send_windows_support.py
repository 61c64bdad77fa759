"""What the send failure-window tests share (tests/faults/test_send_windows.py): a real
`keystore serve` with its sender in a `keystore relay` process of its own (so that it can be
SIGKILLed), a connection to the scripted invoices API (tests/support/downstream.py), sends
made and their records read over HTTP, and the figures each window leaves."""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import requests

from tests.faults.gateway_harness import RelayProcess
from tests.support import Server, new_token
from tests.support.downstream import Downstream

FERNET_KEY = "cNk6cVlTCFCk0NKWaFUBSi1_dBbOG9Z-mUbGkN9yQBw="  # KEYSTORE_SECRET_KEY of the runs
ENV = {"KEYSTORE_SECRET_KEY": FERNET_KEY, "KEYSTORE_RELAY_IN_SERVE": "false",
       "KEYSTORE_RELAY_CONCURRENCY": "4"}
SCOPE = "invoice"
TIMEOUT_SECONDS = 1  # the connection's: a stall of STALL_SECONDS outlasts it
STALL_SECONDS = 3
SETTLE_SECONDS = 90  # a killed relay's send waits for its lease to run out, then goes again
SETTLED = ("succeeded", "failed", "needs_reconciliation")
# A check of the invoices API: the invoice with the send's reference, found by its first
# item, absent when the list is empty.
CHECK = {"method": "GET", "path": "/invoices?reference={reference}",
         "found": {"pointer": "/data/0"}, "resource_id": "/data/0/id", "absent": "/data"}


@dataclass
class Stack:
    server: Server
    relay: RelayProcess
    operator: str
    client: str

    def call(self, method: str, path: str, token: Optional[str] = None, **kw):
        r = requests.request(method, self.server.url + path, timeout=60, headers={
            "Authorization": f"Bearer {token or self.operator}"}, **kw)
        return r.status_code, (r.json() if r.content else None), r.headers

    def connect(self, api: Downstream, check: bool = False, **extra) -> str:
        """A new connection to `api`, deduping on its header if it does; its name."""
        name = "billing-" + uuid.uuid4().hex[:8]
        body = {"name": name, "base_url": api.url + "/v1",
                "headers": {"Authorization": "Bearer sk_test_downstream"},
                "idempotency_header": api.dedupe_header, "timeout_seconds": TIMEOUT_SECONDS,
                "retry_window_seconds": 120, "max_in_flight": 4,
                **({"check": CHECK} if check else {}), **extra}
        status, answer, _ = self.call("POST", "/v1/connections", json=body)
        assert status == 201, answer
        return name

    def send(self, connection: str, key: str, wait: int = 10, amount: int = 1250):
        """POST /v1/send of an invoice whose reference is `<scope>:<key>`."""
        return self.call("POST", "/v1/send", token=self.client, json={
            "scope": SCOPE, "key": key, "payload": {"amount": amount},
            "connection": connection, "resource_id_pointer": "/id", "wait_seconds": wait,
            "request": {"method": "POST", "path": "/invoices",
                        "json": {"reference": f"{SCOPE}:{key}", "amount": amount}}})

    def record(self, key: str) -> Optional[dict]:
        status, answer, _ = self.call("GET", "/v1/keys", params={"scope": SCOPE, "key": key})
        assert status in (200, 404), answer
        return answer["record"] if status == 200 else None

    def settled(self, key: str, timeout: float = SETTLE_SECONDS) -> dict:
        """The record once its send settled (a needs_reconciliation one with its review)."""
        deadline = time.monotonic() + timeout
        while True:
            record = self.record(key)
            if record and record["state"] in SETTLED and (
                    record["state"] != "needs_reconciliation" or record.get("review")):
                return record
            assert time.monotonic() < deadline, f"not settled in {timeout} s: {record}"
            time.sleep(0.2)

    def stop(self) -> None:
        self.relay.stop()
        self.server.stop()


def start_stack(database_url: str, tmp_path: Path, tenant: str = "windows") -> Stack:
    server = Server(database_url, workers=1, threads=8, log_path=tmp_path / "server.log",
                    env=ENV).start()
    relay = RelayProcess(database_url, ENV, tmp_path / "relay.log", concurrency=4).start()
    return Stack(server, relay, new_token(database_url, tenant, "operator"),
                 new_token(database_url, tenant, "client"))


def figures(api: Downstream, key: str, record: dict, answers: list) -> dict:
    """What a window left: the API's invoices and requests for the send's reference, the
    record's state, its resource id and review, and the service's answers."""
    reference = f"{SCOPE}:{key}"
    review = record.get("review") or {}
    return {"invoices": api.created(reference), "posts": api.requests(reference),
            "checks": api.requests(reference, method="GET"),
            "post_keys": sorted({s.headers.get(api.key_header.lower(), "-")
                                 for s in api.requests_seen(reference)}),
            "state": record["state"],
            "resource_id": (record.get("result") or {}).get("resource_id"),
            "review": review.get("kind"), "answers": answers}


def said(status: int, body: Optional[dict]) -> str:
    """An answer of POST /v1/send in short: its status and outcome (or error code)."""
    body = body or {}
    return f"{status} {body.get('outcome') or (body.get('error') or {}).get('code')}"


def exactly_once_or_review(got: dict) -> bool:
    """The windows' rule: one invoice and a settled record that says so, or none and a
    review (or a failure the API itself gave); never two."""
    if got["invoices"] == 1:
        return got["state"] == "succeeded" or got["review"] is not None
    return got["invoices"] == 0 and (got["review"] is not None or got["state"] == "failed")
