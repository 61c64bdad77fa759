"""Versions on the operators' page are written as the API writes them (issue 13): a timestamp
version in UTC RFC 3339, never the microseconds it is stored as."""
from __future__ import annotations

import json

from keystore_service.storage.tables import records, resolutions
from keystore_service.web.ui import ui_text

from .support import SCOPE, record_url

STAMP, MICROS = "2026-01-01T00:00:00Z", "1767225600000000"
NEWER, NEWER_MICROS = "2026-01-02T03:04:05.5Z", "1767323045500000"


def claim_and_mismatch(http, key: str, version) -> None:
    status, body, _ = http.post("/v1/claim", {"scope": SCOPE, "key": key, "version": version,
                                              "payload": {"n": 1}})
    assert status == 201, body
    http.post("/v1/complete", {"scope": SCOPE, "key": key, "lease_token": body["lease_token"],
                               "state": "succeeded"})
    status, body, _ = http.post("/v1/claim", {"scope": SCOPE, "key": key, "version": version,
                                              "payload": {"n": 2}})
    assert status == 422, body  # the same version with another payload: a review


def test_the_record_page_and_the_queue_show_a_timestamp_version_as_rfc3339(browser, acme,
                                                                            tokens):
    claim_and_mismatch(acme, "evt_time", STAMP)
    claim_and_mismatch(acme, "evt_int", 42)
    browser.sign_in(tokens["ana"])
    browser.get(record_url("evt_time"))
    assert f"<code>{STAMP}</code>" in browser.html and MICROS not in browser.html
    browser.get(record_url("evt_int"))
    assert "<code>42</code>" in browser.html
    browser.get("/ui/")
    assert "evt_time" in browser.html and MICROS not in browser.html


def test_audit_snapshots_show_versions_as_rfc3339(app, browser, acme, tokens):
    """A resolution whose snapshots differ in version (a stand-in row: no operator action
    changes a version today, but the trail must show one right if it ever differs)."""
    claim_and_mismatch(acme, "evt_time", STAMP)
    ks = app.extensions["keystore"]
    with ks.database.engine.begin() as conn:
        row = conn.execute(records.select().where(records.c.key == "evt_time")).one()._asdict()
        before = {k: v for k, v in row.items() if k != "lease_token_hash"}
        after = {**before, "version": int(NEWER_MICROS)}
        conn.execute(resolutions.insert().values(
            tenant_id=row["tenant_id"], record_id=row["id"], review_id=None, scope=SCOPE,
            key="evt_time", action="dismiss", actor="ana", at=row["last_seen_at"],
            before=json.dumps(before), after=json.dumps(after)))
    browser.sign_in(tokens["ana"])
    browser.get(record_url("evt_time"))
    audit = browser.html.split('id="audit-h"')[1]
    assert f"<td>{STAMP}</td><td>{NEWER}</td>" in audit
    assert MICROS not in audit and NEWER_MICROS not in audit


def test_field_values_of_a_snapshot():
    snapshot = {"version_kind": "time", "version": int(MICROS)}
    assert ui_text.field_value("version", int(MICROS), snapshot) == STAMP
    assert ui_text.field_value("version", 7, {"version_kind": "int"}) == "7"
    assert ui_text.field_value("version", None, snapshot) == "—"
    assert ui_text.version("time", int(NEWER_MICROS)) == NEWER
    assert ui_text.version(None, None) == ""
