"""Issues (docs/api.md, "Issues and alerts"): what opens each kind, that it counts instead of
opening a second one (also under watchers in concurrent threads), that it resolves by
itself, and what a person does to one, through /v1/issues; both backends."""
from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from keystore_service.storage.db import normalise_url
from tests.support import T0

from .support import create_source, signed


def _gw(app):
    return app.extensions["keystore"].gateway


def _sql(database_url, statement, **params):
    engine = sa.create_engine(normalise_url(database_url))
    with engine.begin() as conn:
        rows = conn.execute(sa.text(statement), params)
        out = rows.fetchall() if rows.returns_rows else None
    engine.dispose()
    return out


def _issues(gw, **query):
    status, body, _ = gw.get("/v1/issues", **query)
    assert status == 200, body
    return body["issues"]


def deliver(gw, source, event_id="evt_1", body=b'{"n": 1}'):
    path = "/hooks/" + source["ingest_url"].rsplit("/", 1)[1]
    r = gw.client.post(path, data=body, headers=signed(body, event_id))
    return r.status_code, r.get_json(silent=True)


def pump(forwarding) -> list:
    """Take what is due and forward it, as one relay round does; the outcomes."""
    return [o.value if o else None for o in (
        forwarding.settle(job, "issues-test", forwarding.forward(job))
        for job in forwarding.take("issues-test", 16))]


def _ingest(gw_app, source, event_id, body=b'{"n": 1}'):
    path = "/hooks/" + source["ingest_url"].rsplit("/", 1)[1]
    r = gw_app.test_client().post(path, data=body, headers=signed(body, event_id))
    assert r.status_code in (200, 202), r.get_json()


def test_a_backlog_opens_once_counts_and_resolves_by_itself(gw_app, gw, sink, clock,
                                                            database_url):
    source = create_source(gw, gw.token, sink.url, backlog_alert_seconds=60)
    assert source["backlog_alert_seconds"] == 60 and source["alert_after_seconds"] == 300
    _ingest(gw_app, source, "e1")  # no relay runs: it stays queued
    issues = _gw(gw_app).issues
    clock.advance(59)
    issues.watch()
    assert _issues(gw) == []
    clock.advance(1)
    assert issues.watch()["opened"] == 1
    issues.watch()
    issues.watch()
    [issue] = _issues(gw)
    assert (issue["kind"], issue["subject"], issue["state"]) == ("backlog", "shop", "open")
    assert "oldest queued event waits 60 s" in issue["detail"]
    assert issue["url"].endswith(f"/ui/issues#issue-{issue['id']}")
    _sql(database_url, "UPDATE hook_events SET state = 'delivered'")
    assert issues.watch()["resolved"] == 1
    [issue] = _issues(gw)
    assert issue["state"] == "resolved" and issue["resolved_at"] is not None
    # the next backlog is a new issue; the resolved one stays as history
    _ingest(gw_app, source, "e2")
    clock.advance(61)
    issues.watch()
    assert [i["state"] for i in _issues(gw)] == ["open", "resolved"]


def test_a_backlog_stays_open_while_its_oldest_event_is_being_forwarded(gw_app, gw, sink,
                                                                        clock):
    """The oldest waiting event counts while a relay forwards it too: counted only while
    queued, a backlog resolved at each of its forwards and opened again after (two notices
    per retry; tests/ui/test_browser_issues saw the Slack channel told twice)."""
    source = create_source(gw, gw.token, sink.url, backlog_alert_seconds=0)
    _ingest(gw_app, source, "e1")
    issues = _gw(gw_app).issues
    assert issues.watch()["opened"] == 1
    forwarding = _gw(gw_app).forwarding
    (job,) = forwarding.take("backlog-relay", 4)  # being forwarded: delivering, not queued
    assert issues.watch()["resolved"] == 0
    [issue] = _issues(gw)
    assert issue["state"] == "open"
    forwarding.settle(job, "backlog-relay", forwarding.forward(job))  # delivered
    assert issues.watch()["resolved"] == 1


def test_delivery_failing_waits_for_alert_after_seconds(gw_app, gw, sink, clock,
                                                         database_url):
    create_source(gw, gw.token, sink.url, alert_after_seconds=120)
    issues = _gw(gw_app).issues
    _sql(database_url,
         "UPDATE hook_destinations SET failing_since = :t, last_error = 'status 503'",
         t=clock.now)
    clock.advance(119)
    issues.watch()
    assert _issues(gw) == []
    clock.advance(1)
    issues.watch()
    [issue] = _issues(gw, kind="delivery_failing")
    assert "forwards failing for 120 s (status 503)" in issue["detail"]
    # failing again after a success, but not yet for long: the issue stays (undecided)
    _sql(database_url, "UPDATE hook_destinations SET failing_since = :t", t=clock.now)
    issues.watch()
    assert _issues(gw)[0]["state"] == "open"
    _sql(database_url, "UPDATE hook_destinations SET failing_since = NULL, last_error = NULL")
    issues.watch()
    assert _issues(gw)[0]["state"] == "resolved"


def test_reviews_waiting_per_scope_and_kind_but_not_delivery_failed(gw_app, gw, op,
                                                                   database_url):
    client_http = type(gw)(gw.client, op["client"])
    for payload in ({"a": 1}, {"a": 2}, {"a": 3}):
        client_http.post("/v1/claim", {"scope": "create_invoice", "key": "k1",
                                       "payload": payload})
    issues = _gw(gw_app).issues
    issues.watch()
    [issue] = _issues(gw)
    assert (issue["kind"], issue["subject"]) == ("reviews_waiting",
                                                 "create_invoice/fingerprint_mismatch")
    assert issue["count"] == 1 and "1 open fingerprint_mismatch" in issue["detail"]
    # a delivery_failed review is delivery_failing's, not reviews_waiting's
    _sql(database_url, "UPDATE reviews SET kind = 'delivery_failed'")
    issues.watch()
    assert _issues(gw)[0]["state"] == "resolved"


def test_a_source_no_key_opens_is_source_broken(gw_app, gw, sink, database_url):
    create_source(gw, gw.token, sink.url)
    _sql(database_url, "UPDATE hook_sources SET sealed = 'gAAAAAnot-a-token'")
    issues = _gw(gw_app).issues
    issues.watch()
    [issue] = _issues(gw)
    assert issue["kind"] == "source_broken" and "KEYSTORE_SECRET_KEY" in issue["detail"]


def test_acknowledge_resolve_ignore_and_their_refusals(gw_app, gw, op, sink, clock,
                                                       database_url):
    create_source(gw, gw.token, sink.url)
    issues = _gw(gw_app).issues
    _sql(database_url, "UPDATE hook_sources SET sealed = 'x'")
    issues.watch()
    [issue] = _issues(gw)
    n = issue["id"]
    status, body, _ = gw.post(f"/v1/issues/{n}/acknowledge")
    assert status == 200 and body["issue"]["state"] == "acknowledged"
    assert body["issue"]["acknowledged_by"]
    # another tenant's, a client token, odd ids, unknown actions
    assert gw.post(f"/v1/issues/{n}/resolve", token=op["globex"])[0] == 404
    assert gw.post(f"/v1/issues/{n}/resolve", token=op["client"])[0] == 403
    for bad in ("0", "-1", "1e3", "٣", str(2 ** 63), "9" * 40, "%0d%0a"):
        status, body, _ = gw.post(f"/v1/issues/{bad}/resolve")
        assert status == 404 and body["error"]["code"] == "not_found", bad
    assert gw.post(f"/v1/issues/{n}/delete")[0] == 404
    status, body, _ = gw.post(f"/v1/issues/{n}/ignore")
    assert status == 200 and body["issue"]["state"] == "ignored"
    issues.watch()  # ignored: its condition opens no other while it lasts
    assert len(_issues(gw)) == 1
    status, body, _ = gw.post(f"/v1/issues/{n}/resolve")
    assert status == 200 and body["issue"]["state"] == "resolved"
    status, body, _ = gw.post(f"/v1/issues/{n}/resolve")
    assert status == 409 and body["error"]["code"] == "already_completed"
    issues.watch()  # resolved by a person while it still holds: a new issue opens
    assert [i["state"] for i in _issues(gw)] == ["open", "resolved"]


@pytest.mark.parametrize("query", [{"state": "closed"}, {"kind": "nope"}, {"limit": "3"},
                                   {"state": "open\r\n"}])
def test_a_bad_query_is_400(gw, query):
    status, body, _ = gw.get("/v1/issues", **query)
    assert status == 400 and body["error"]["code"] == "invalid_request"


def test_send_unresolved_is_a_kind_the_filter_takes(gw):
    assert _issues(gw, kind="send_unresolved") == []


def test_watchers_in_threads_open_one_issue_and_one_notice(gw_app, gw, sink, clock,
                                                           database_url):
    source = create_source(gw, gw.token, sink.url, backlog_alert_seconds=0)
    status, _, _ = gw.post("/v1/alert-channels", {"name": "ops", "kind": "slack",
                                                  "url": sink.url})
    assert status == 201
    _ingest(gw_app, source, "e1")
    issues = _gw(gw_app).issues
    barrier, errors = threading.Barrier(6), []

    def look():
        try:
            barrier.wait()
            for _ in range(5):
                issues.watch()
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)
    threads = [threading.Thread(target=look) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(_issues(gw)) == 1
    [(n,)] = _sql(database_url, "SELECT count(*) FROM alert_notices WHERE event = 'opened'")
    assert n == 1
    assert T0 <= clock.now


def test_delivery_failing_through_real_forwards_opens_and_resolves(gw_app, gw, sink, clock,
                                                                    forwarding):
    answers = {"status": 503}
    sink.answer = lambda n, r: answers["status"]
    source = create_source(gw, gw.token, sink.url, alert_after_seconds=30)
    assert deliver(gw, source)[0] == 202
    issues = _gw(gw_app).issues
    assert pump(forwarding) == ["retry"]
    issues.watch()
    assert _issues(gw, kind="delivery_failing") == []  # failing for 0 s of its 30
    clock.advance(30)
    issues.watch()
    [issue] = _issues(gw, kind="delivery_failing")
    assert "status 503" in issue["detail"] or "503" in issue["detail"]
    answers["status"] = 200
    clock.advance(600)
    pump(forwarding)
    issues.watch()
    assert _issues(gw, kind="delivery_failing")[0]["state"] == "resolved"
    # an event failed for good (a 4xx that is not retried) opens it at once, and a
    # redelivery that succeeds (closing its delivery_failed review) resolves it
    answers["status"] = 400
    assert deliver(gw, source, event_id="evt_2")[0] == 202
    assert pump(forwarding) == ["failed"]
    answers["status"] = 200
    issues.watch()
    live = [i for i in _issues(gw, kind="delivery_failing") if i["state"] == "open"]
    assert len(live) == 1 and "1 event(s) failed for good" in live[0]["detail"]
    assert gw.post("/v1/deliveries/redeliver", {"source": "shop", "event_id": "evt_2"})[0] == 202
    pump(forwarding)
    issues.watch()
    assert all(i["state"] == "resolved" for i in _issues(gw, kind="delivery_failing"))
