"""SIGKILL the whole server: what was committed comes back, a held lease follows on_stale."""
from __future__ import annotations

import time

from tests.support import Api, Server, new_token


def test_a_completed_record_survives_a_kill_and_a_held_lease_follows_on_stale(
        database_url, tmp_path):
    token = new_token(database_url, "durable")
    server = Server(database_url, workers=4, log_path=tmp_path / "server.log").start()
    api = Api(server.url, token)
    done = {"scope": "invoice", "key": "evt-done", "payload": {"amount": 1}}
    status, claimed, _ = api.post("/v1/claim", done)
    assert status == 201
    api.post("/v1/complete", {"scope": "invoice", "key": "evt-done", "state": "succeeded",
                              "lease_token": claimed["lease_token"],
                              "result": {"resource_id": "INV-1"}})
    held = {}
    for policy in ("reconcile", "retry"):
        status, body, _ = api.post("/v1/claim", {"scope": "invoice", "key": f"held-{policy}",
                                                 "lease_seconds": 2, "on_stale": policy})
        assert status == 201
        held[policy] = body["lease_token"]

    server.kill()  # master and workers, SIGKILL, mid-lease
    server = Server(database_url, workers=4, port=server.port,
                    log_path=tmp_path / "server.log").start()
    try:
        api = Api(server.url, token)
        status, body, headers = api.post("/v1/claim", done)
        assert (status, body["outcome"]) == (200, "replay")
        assert body["record"]["result"] == {"resource_id": "INV-1"}
        status, body, _ = api.post("/v1/claim", {"scope": "invoice", "key": "held-retry"})
        if status == 409:  # the lease is still live after a fast restart: wait it out
            time.sleep(float(body["error"]["details"]["retry_after_seconds"]))
            status, body, _ = api.post("/v1/claim", {"scope": "invoice", "key": "held-retry"})
        assert (status, body["outcome"], body["attempt"]) == (201, "acquired", 2)
        status, body, _ = api.post("/v1/claim", {"scope": "invoice", "key": "held-reconcile"})
        assert (status, body["outcome"]) == (409, "needs_reconciliation")
        # the killed holder's token can still settle its own attempt (it did the work)
        status, body, _ = api.post("/v1/complete", {"scope": "invoice", "key": "held-reconcile",
                                                    "lease_token": held["reconcile"],
                                                    "state": "succeeded"})
        assert (status, body["record"]["state"]) == (200, "succeeded")
    finally:
        server.stop()
