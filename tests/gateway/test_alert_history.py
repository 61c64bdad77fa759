"""The issues' history is kept KEYSTORE_KEEP_ISSUES_DAYS (90) and then swept
(storage/alert_history.py): resolved issues and the notices that are done go, what a person
may still need stays (a live issue, a notice not yet sent and the issue it tells of). Real
channels on loopback (one answering 503), the real sweep, both backends."""
from __future__ import annotations

import sqlalchemy as sa

from keystore_service.app import create_app
from keystore_service.settings import Settings
from keystore_service.storage.db import normalise_url

from .support import KEY, Sink, create_source, signed

DAY = 86_400


def _ks(app):
    return app.extensions["keystore"]


def _sql(database_url, statement, **params):
    engine = sa.create_engine(normalise_url(database_url))
    with engine.begin() as conn:
        rows = conn.execute(sa.text(statement), params)
        out = rows.fetchall() if rows.returns_rows else None
    engine.dispose()
    return out


def _backlog(gw_app, gw, sink_url, name):
    """A source whose one event waits at once past its backlog threshold (0)."""
    source = create_source(gw, gw.token, sink_url, name=name, backlog_alert_seconds=0)
    body = b'{"n": 1}'
    path = "/hooks/" + source["ingest_url"].rsplit("/", 1)[1]
    assert gw_app.test_client().post(path, data=body, headers=signed(body, "e1")).status_code \
        == 202


def _settle(gw_app):
    """The watchers and the sender, as a relay's rounds run them."""
    gateway = _ks(gw_app).gateway
    gateway.issues.watch()
    while gateway.alerts.send_due():
        pass


def _clear(gw_app, database_url, name):
    """The source's backlog is gone: its issue resolves at the next watch."""
    _sql(database_url, "UPDATE hook_events SET state = 'delivered' WHERE source_id = "
                       "(SELECT id FROM hook_sources WHERE name = :n)", n=name)
    _settle(gw_app)


def _history(database_url):
    """{issue subject: (state, [(channel, event, state) of its notices])}."""
    issues = _sql(database_url, "SELECT id, subject, state FROM issues")
    notices = _sql(database_url, "SELECT n.issue_id, c.name, n.event, n.state FROM "
                                 "alert_notices n JOIN alert_channels c ON c.id = n.channel_id")
    return {subject: (state, sorted((c, e, s) for i, c, e, s in notices if i == iid))
            for iid, subject, state in issues}


def test_old_history_goes_and_what_a_person_may_need_stays(gw_app, gw, sink, clock,
                                                            database_url):
    ops, down = Sink(), Sink(lambda n, r: 503)
    try:
        assert gw.post("/v1/alert-channels", {"name": "ops", "kind": "slack",
                                              "url": ops.url + "/T0/B0/X"})[0] == 201
        _backlog(gw_app, gw, sink.url, "old")
        _settle(gw_app)
        _clear(gw_app, database_url, "old")  # opened and resolved, both told
        assert gw.post("/v1/alert-channels", {"name": "down", "kind": "webhook",
                                              "url": down.url})[0] == 201
        _backlog(gw_app, gw, sink.url, "held")
        _settle(gw_app)
        _clear(gw_app, database_url, "held")  # resolved; "down" has not heard of it yet
        _backlog(gw_app, gw, sink.url, "live")
        _settle(gw_app)  # still open
        before = _history(database_url)
        assert before == {
            "old": ("resolved", [("ops", "opened", "sent"), ("ops", "resolved", "sent")]),
            "held": ("resolved", [("down", "opened", "queued"), ("down", "resolved", "queued"),
                                  ("ops", "opened", "sent"), ("ops", "resolved", "sent")]),
            "live": ("open", [("down", "opened", "queued"), ("ops", "opened", "sent")])}, before
        jobs = _ks(gw_app).jobs
        clock.advance(89 * DAY)
        jobs.sweep()
        assert _history(database_url) == before  # within the 90 days: all of it stays
        clock.advance(2 * DAY)
        jobs.sweep()
        assert _history(database_url) == {
            "held": ("resolved", [("down", "opened", "queued"), ("down", "resolved", "queued")]),
            "live": ("open", [("down", "opened", "queued")])}
        listed = gw.get("/v1/issues")[1]["issues"]
        assert sorted(i["subject"] for i in listed) == ["held", "live"]
        # once "down" has given up on them (a notice is retried for a day), the resolved
        # issue goes at the next sweep too; the live one stays, whatever its age
        _sql(database_url, "UPDATE alert_notices SET state = 'failed'")
        jobs.sweep()
        assert _history(database_url) == {"live": ("open", [])}
    finally:
        ops.close()
        down.close()


def test_the_kept_days_are_a_setting(database_url, clock):
    app = create_app(Settings(database_url=database_url, secret_key=KEY, keep_issues_days=1),
                     clock)
    try:
        accounts = _ks(app).accounts
        tenant = accounts.create_tenant("acme", clock())
        _sql(database_url, "INSERT INTO issues (tenant_id, kind, subject, state, opened_at, "
                           "last_seen_at, count, resolved_at) VALUES (:t, 'backlog', 'a', "
                           "'resolved', :at, :at, 1, :at)", t=tenant, at=clock())
        clock.advance(DAY, micros=-1)
        _ks(app).jobs.sweep()
        assert len(_sql(database_url, "SELECT id FROM issues")) == 1
        clock.advance(micros=1)  # exactly a day after its resolution
        _ks(app).jobs.sweep()
        assert _sql(database_url, "SELECT id FROM issues") == []
    finally:
        _ks(app).database.engine.dispose()
