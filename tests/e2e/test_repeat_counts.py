"""Repeats counted later, in a real server (KEYSTORE_ASYNC_REPEAT_COUNTS=true): a stop writes
every count; a SIGKILL loses at most the counts of the worker's last second (docs/api.md)."""
from __future__ import annotations

import os
import signal
import time

from keystore_service.storage.db import Database, create
from keystore_service.storage.records import RecordStore
from tests.support import Api, Server, new_token

ASYNC = {"KEYSTORE_ASYNC_REPEAT_COUNTS": "true"}


def stored_count(url: str, tenant_id: int, key: str) -> int:
    db = Database(create(url))
    try:
        return RecordStore(db).get(tenant_id, "orders", key).duplicate_count
    finally:
        db.engine.dispose()


def finished(api: Api, key: str) -> None:
    status, body, _ = api.post("/v1/claim", {"scope": "orders", "key": key})
    assert status == 201
    status, _, _ = api.post("/v1/complete", {"scope": "orders", "key": key, "state":
                                             "succeeded", "lease_token": body["lease_token"]})
    assert status == 200


def replays(api: Api, key: str, n: int) -> None:
    for _ in range(n):
        status, body, _ = api.post("/v1/claim", {"scope": "orders", "key": key})
        assert (status, body["outcome"]) == (200, "replay")


def tenant_of(url: str, name: str) -> int:
    db = Database(create(url))
    try:
        with db.connection() as cur:
            cur.execute("SELECT id FROM tenants WHERE name = " +
                        ("?" if db.sqlite else "%s"), (name,))
            return cur.fetchone()[0]
    finally:
        db.engine.dispose()


def test_a_stop_writes_every_count(e2e_url, tmp_path):
    token = new_token(e2e_url, "counts-stop")
    server = Server(e2e_url, workers=2, env=ASYNC, log_path=tmp_path / "log").start()
    try:
        api = Api(server.url, token)
        finished(api, "stop")
        replays(api, "stop", 40)
    finally:
        server.stop()  # SIGTERM: each worker writes what it holds on its way out
    assert stored_count(e2e_url, tenant_of(e2e_url, "counts-stop"), "stop") == 40


def test_a_sigkill_loses_at_most_the_last_seconds_counts(e2e_url, tmp_path):
    token = new_token(e2e_url, "counts-kill")
    server = Server(e2e_url, workers=1, env=ASYNC, log_path=tmp_path / "log").start()
    try:
        api = Api(server.url, token)
        finished(api, "kill")
        replays(api, "kill", 30)
        time.sleep(2.5)  # written by now (within a second)
        replays(api, "kill", 20)
        for pid in server.worker_pids():
            os.kill(pid, signal.SIGKILL)  # no chance to write the last 20
    finally:
        server.kill()
    count = stored_count(e2e_url, tenant_of(e2e_url, "counts-kill"), "kill")
    assert 30 <= count <= 50, count
