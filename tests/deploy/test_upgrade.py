"""Upgrading a database of the previous release keeps everything: `keystore db upgrade` from
release v0.1.0 (schema revision 0004, its data in v0_1_0.json) to this code's head, on both
backends; every row of v0.1.0 is still there as it was, every token still works as it did,
and the service answers repeats with the stored results."""
from __future__ import annotations

import json
import time
from pathlib import Path

import requests
from alembic import command
from sqlalchemy import create_engine, text

from keystore_service.storage import migrate
from keystore_service.storage.db import normalise_url
from tests.support import T0, Server, keystore_cli

V0_1_0 = json.loads((Path(__file__).with_name("v0_1_0.json")).read_text())
V0_1_0_REVISION = "0004"
# Every column that holds an instant (microseconds since the epoch): shifted so that the
# release's data looks a few minutes old whenever the test runs, or leases and TTLs set at
# T0 (in 2027) would have run out by the time someone runs this.
INSTANTS = {"created_at", "revoked_at", "lease_acquired_at", "lease_expires_at",
            "first_seen_at", "last_seen_at", "expires_at", "checkpoint_at", "acquired_at",
            "ended_at", "opened_at", "updated_at", "resolved_at", "at", "window_start"}
MINUTES_AGO = 5 * 60 * 1_000_000


def shifted(table: str, delta: int) -> list[tuple]:
    columns = V0_1_0["tables"][table]["columns"]
    return [tuple(v + delta if c in INSTANTS and v is not None else v
                  for c, v in zip(columns, row, strict=True))
            for row in V0_1_0["tables"][table]["rows"]]


def make_v0_1_0_database(url: str, delta: int) -> None:
    """The schema of v0.1.0 (migrations up to 0004 only) with v0.1.0's rows in it."""
    engine = create_engine(normalise_url(url))
    with engine.begin() as conn:
        cfg = migrate._config()
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, V0_1_0_REVISION)
        for table, data in V0_1_0["tables"].items():
            if not data["rows"]:
                continue
            cols = ", ".join(f'"{c}"' for c in data["columns"])
            marks = ", ".join(f":{c}" for c in data["columns"])
            conn.execute(text(f'INSERT INTO "{table}" ({cols}) VALUES ({marks})'),
                         [dict(zip(data["columns"], row, strict=True))
                          for row in shifted(table, delta)])
            if conn.dialect.name == "postgresql" and "id" in data["columns"]:
                # as v0.1.0 would have left it: the sequence past the rows it numbered
                conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                                  f"(SELECT max(id) FROM \"{table}\"))"))
    engine.dispose()


def rows_now(url: str, table: str) -> list[tuple]:
    columns = V0_1_0["tables"][table]["columns"]
    engine = create_engine(normalise_url(url))
    with engine.connect() as conn:
        names = ", ".join(f'"{c}"' for c in columns)
        got = conn.execute(text(f'SELECT {names} FROM "{table}" ORDER BY 1')).all()
    engine.dispose()
    return [tuple(r) for r in got]


def test_upgrading_from_v0_1_0_keeps_every_record_review_and_token(empty_database):
    url = empty_database()
    delta = (time.time_ns() // 1000 - MINUTES_AGO) - T0
    make_v0_1_0_database(url, delta)
    before = keystore_cli(url, "db", "current", check=False).stdout
    assert before.splitlines()[0] == f"database: {V0_1_0_REVISION}"

    keystore_cli(url, "db", "upgrade")

    have, head = migrate.current(url)
    assert have == head
    for table in V0_1_0["tables"]:
        assert rows_now(url, table) == shifted(table, delta), table

    tokens = V0_1_0["tokens"]
    server = Server(url).start()
    try:
        def post(token, path, body):
            r = requests.post(server.url + path, json=body, timeout=30,
                              headers={"Authorization": f"Bearer {token}"})
            return r.status_code, r.json()

        def get(token, path, **params):
            r = requests.get(server.url + path, params=params, timeout=30,
                             headers={"Authorization": f"Bearer {token}"})
            return r.status_code, r.json()

        # records: repeats get the stored results, per tenant, versions still compared
        status, body = post(tokens["acme"], "/v1/claim", {
            "scope": "create_invoice", "key": "evt_1", "payload": {"amount": 1250}})
        assert (status, body["outcome"]) == (200, "replay")
        assert body["record"]["result"] == {"resource_id": "INV-42", "status_code": 201}
        assert body["record"]["duplicate_count"] == 3  # v0.1.0's 2 repeats, and this one
        status, body = post(tokens["globex"], "/v1/claim", {
            "scope": "create_invoice", "key": "evt_1", "payload": {"amount": 1}})
        assert (status, body["record"]["result"]["resource_id"]) == (200, "G-1")
        status, body = post(tokens["acme"], "/v1/claim", {
            "scope": "create_invoice", "key": "evt_2", "payload": {"amount": 5}})
        assert body["record"]["state"] == "failed"
        assert body["record"]["result"]["body"] == {"error": "card_declined",
                                                    "ünï": [1, 2.5, None]}
        status, body = post(tokens["acme"], "/v1/claim", {
            "scope": "sync_contact", "key": "c-1", "payload": {"v": 1}, "version": 3})
        assert (status, body["outcome"]) == (200, "replay")
        status, body = post(tokens["acme"], "/v1/claim", {
            "scope": "sync_contact", "key": "c-1", "payload": {"v": 2}, "version": 4})
        assert (status, body["outcome"]) == (201, "acquired")
        status, body = get(tokens["acme"], "/v1/keys", scope="long_job", key="job-1")
        assert (status, body["record"]["state"]) == (200, "in_progress")
        status, body = post(tokens["acme"], "/v1/claim", {
            "scope": "send_email", "key": "msg-é-1", "payload": {"to": "ä@example.com"}})
        assert (status, body["outcome"]) == (201, "acquired")  # it was released

        # reviews: the open ones still open, the resolved one with its resolution
        status, body = get(tokens["acme_op"], "/v1/reviews", state="open")
        assert status == 200
        assert sorted((r["kind"], r["key"]) for r in body["reviews"]) == [
            ("fingerprint_mismatch", "evt_1"), ("stale_lease", "ord_8")]
        status, body = get(tokens["acme_op"], "/v1/reviews", state="resolved")
        assert [(r["key"], r["resolution"]) for r in body["reviews"]] == [
            ("ord_7", "mark_succeeded")]

        # tokens: roles as they were, the revoked one still refused
        assert get(tokens["acme"], "/v1/whoami")[1]["tenant"] == "acme"
        assert post(tokens["acme"], "/v1/resolve", {
            "scope": "charge", "key": "ord_8", "action": "release"})[0] == 403
        assert get(tokens["revoked"], "/v1/whoami")[0] == 401
    finally:
        server.stop()
