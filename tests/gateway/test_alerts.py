"""Alert channels and their notices (docs/api.md, "Issues and alerts"), received by real
HTTP sinks on 127.0.0.1 (Slack's body; the webhook body, its Standard Webhooks signature
checked with the library) and by a real SMTP server (aiosmtpd); once per issue and event,
retried, reminders on time, at most 30 an hour per channel; both backends."""
from __future__ import annotations

import base64
import json
import secrets
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from standardwebhooks.webhooks import Webhook

from keystore_service.storage.db import normalise_url
from tests.support import SECOND

from .support import create_source, signed

WHSEC = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def _gw(app):
    return app.extensions["keystore"].gateway


def _channel(gw, **body):
    status, answer, _ = gw.post("/v1/alert-channels", body)
    assert status == 201, answer
    return answer["channel"]


def _backlog(gw_app, gw, sink_url, name="shop"):
    """A source whose event waits at once past its backlog threshold (0)."""
    source = create_source(gw, gw.token, sink_url, name=name, backlog_alert_seconds=0)
    body = b'{"n": 1}'
    path = "/hooks/" + source["ingest_url"].rsplit("/", 1)[1]
    assert gw_app.test_client().post(path, data=body, headers=signed(body, "e1")).status_code \
        == 202
    return source


def _sql(database_url, statement, **params):
    engine = sa.create_engine(normalise_url(database_url))
    with engine.begin() as conn:
        conn.execute(sa.text(statement), params)
    engine.dispose()


def _drain(gw_app):
    alerts = _gw(gw_app).alerts
    while alerts.send_due():
        pass


def test_slack_hears_opened_and_resolved_once_each(gw_app, gw, sink, database_url):
    slack = type(sink)()
    try:
        channel = _channel(gw, name="ops", kind="slack", url=slack.url + "/T000/B000/XXXX")
        assert channel["url"] == f"http://127.0.0.1:{slack.url.split(':')[2].split('/')[0]}/..."
        assert "XXXX" not in json.dumps(channel)
        _backlog(gw_app, gw, sink.url)
        for _ in range(3):
            _gw(gw_app).issues.watch()
            _drain(gw_app)
        [got] = slack.requests
        text = json.loads(got["body"])["text"]
        assert text.startswith("Issue opened: backlog shop") and "/ui/issues#issue-" in text
        issue_id = _gw(gw_app).issues.page(1, None, None)[0].id
        assert got["headers"]["Idempotency-Key"] == f"issue-{issue_id}-opened"
        _sql(database_url, "UPDATE hook_events SET state = 'delivered'")
        _gw(gw_app).issues.watch()
        _gw(gw_app).issues.watch()
        _drain(gw_app)
        assert len(slack.requests) == 2
        assert json.loads(slack.requests[1]["body"])["text"].startswith("Issue resolved")
    finally:
        slack.close()


def test_a_webhook_channel_is_signed_per_standard_webhooks(gw_app, gw, sink, clock):
    hook = type(sink)()
    try:
        _channel(gw, name="n8n", kind="webhook", url=hook.url, secret=WHSEC,
                 kinds=["backlog"])
        _backlog(gw_app, gw, sink.url)
        _gw(gw_app).issues.watch()
        _drain(gw_app)
        [got] = hook.requests
        body = json.loads(got["body"])
        assert body["type"] == "issue.opened" and body["issue"]["kind"] == "backlog"
        assert set(body["issue"]) >= {"id", "kind", "subject", "state", "opened_at",
                                      "last_seen_at", "count", "resolved_at",
                                      "acknowledged_by", "url"}
        h = got["headers"]
        assert h["webhook-id"] == h["Idempotency-Key"] == f"issue-{body['issue']['id']}-opened"
        assert int(h["webhook-timestamp"]) == clock.now // SECOND
        want = Webhook(WHSEC).sign(h["webhook-id"], datetime.fromtimestamp(
            int(h["webhook-timestamp"]), UTC), got["body"].decode())
        assert h["webhook-signature"] == want
    finally:
        hook.close()


def test_a_failing_channel_is_retried_with_backoff_under_the_same_key(gw_app, gw, sink,
                                                                       clock):
    hook = type(sink)(answer=lambda n, r: 503 if n < 2 else 200)
    try:
        _channel(gw, name="ops", kind="webhook", url=hook.url)
        _backlog(gw_app, gw, sink.url)
        _gw(gw_app).issues.watch()
        _drain(gw_app)
        assert len(hook.requests) == 1
        clock.advance(4)
        _drain(gw_app)
        assert len(hook.requests) == 1  # its backoff: 5 s after the first attempt
        clock.advance(1)
        _drain(gw_app)
        clock.advance(10)
        _drain(gw_app)
        assert len(hook.requests) == 3
        assert len({r["headers"]["Idempotency-Key"] for r in hook.requests}) == 1
        clock.advance(3600)
        _drain(gw_app)
        assert len(hook.requests) == 3  # sent: never again
    finally:
        hook.close()


def test_reminders_while_open_and_unacknowledged(gw_app, gw, sink, clock):
    hook = type(sink)()
    try:
        _channel(gw, name="ops", kind="slack", url=hook.url, remind_after_seconds=60)
        _backlog(gw_app, gw, sink.url)
        issues = _gw(gw_app).issues
        issues.watch()
        clock.advance(59)
        issues.watch()
        _drain(gw_app)
        assert len(hook.requests) == 1
        clock.advance(1)
        issues.watch()
        issues.watch()
        _drain(gw_app)
        assert len(hook.requests) == 2
        assert json.loads(hook.requests[1]["body"])["text"].startswith("Issue still open")
        assert hook.requests[1]["headers"]["Idempotency-Key"].endswith("-reminder-1")
        issue_id = issues.page(1, None, None)[0].id
        assert gw.post(f"/v1/issues/{issue_id}/acknowledge")[0] == 200
        clock.advance(600)
        issues.watch()
        _drain(gw_app)
        assert len(hook.requests) == 2  # acknowledged: no more reminders
    finally:
        hook.close()


def test_a_storm_is_thirty_notices_then_one_with_the_count(gw_app, gw, sink, clock):
    hook = type(sink)()
    try:
        _channel(gw, name="ops", kind="slack", url=hook.url, remind_after_seconds=0)
        for n in range(40):
            _backlog(gw_app, gw, sink.url, name=f"s{n}")
        _gw(gw_app).issues.watch()
        _drain(gw_app)
        assert len(hook.requests) == 30
        clock.advance(3599)
        _drain(gw_app)
        assert len(hook.requests) == 30
        clock.advance(1)
        _drain(gw_app)
        assert len(hook.requests) == 31
        assert json.loads(hook.requests[30]["body"])["text"].startswith(
            "10 more issue notice(s) were held back")
        clock.advance(7200)
        _drain(gw_app)
        assert len(hook.requests) == 31
    finally:
        hook.close()


def test_a_test_notice_per_channel(gw_app, gw, sink):
    _channel(gw, name="ops", kind="slack", url=sink.url)
    status, body, _ = gw.post("/v1/alert-channels/ops/test")
    assert (status, body) == (202, {"status": "queued"})
    _drain(gw_app)
    assert json.loads(sink.requests[0]["body"])["text"].startswith("Test notice")
    assert gw.post("/v1/alert-channels/nope/test")[0] == 404


@pytest.mark.parametrize("body, field", [
    ({"url": "http://169.254.169.254/latest/meta-data"}, "url"),
    ({"url": "http://[::ffff:169.254.169.254]/"}, "url"),
    ({"url": "http://100.100.100.200/"}, "url"),
    ({"url": "http://user:pw@127.0.0.1/"}, "url"),
    ({"url": "ftp://127.0.0.1/"}, "url"),
    ({"url": "http://127.0.0.1/\r\nX: y"}, "url"),
    ({"url": "http://%31%32%37.0.0.1/"}, "url"),
    ({"name": "Ops"}, "name"), ({"name": "a" * 65}, "name"), ({"name": "../x"}, "name"),
    ({"kinds": []}, "kinds"), ({"kinds": ["backlog", "nope"]}, "kinds"),
    ({"kinds": "backlog"}, "kinds"),
    ({"remind_after_seconds": 4}, "remind_after_seconds"),
    ({"remind_after_seconds": 2 ** 63}, "remind_after_seconds"),
    ({"remind_after_seconds": "60"}, "remind_after_seconds"),
    ({"secret": "whsec_short"}, "secret"),
    ({"to": "a@example.com"}, "to"),
    ({"kind": "sms"}, "kind"), ({"extra": 1}, "extra"),
])
def test_an_attackers_channels_are_refused_and_nothing_is_stored(gw, body, field):
    status, answer, _ = gw.post("/v1/alert-channels", {"name": "ops", "kind": "webhook",
                                                       "url": "http://127.0.0.1:9/", **body})
    assert status == 400, answer
    assert answer["error"]["code"] == "invalid_request"
    assert field in json.dumps(answer["error"])
    assert gw.get("/v1/alert-channels")[1] == {"channels": []}


@pytest.mark.parametrize("to", ["a@example.com\r\nBcc: victim@example.com",
                                "a@example.com\nSubject: x", "A <a@example.com>",
                                "a@example.com, b@example.com", "a@exa mple.com", "@x.org",
                                "ä@example.com", "a@example.com\x00", ""])
def test_email_addresses_with_header_injection_are_refused(gw, to):
    status, answer, _ = gw.post("/v1/alert-channels", {"name": "mail", "kind": "email",
                                                       "to": to})
    assert status == 400 and answer["error"]["code"] == "invalid_request", to


def test_channels_read_change_delete_and_other_tenants(gw_app, gw, op, sink):
    _channel(gw, name="ops", kind="webhook", url=sink.url, secret=WHSEC)
    status, body, _ = gw.get("/v1/alert-channels/ops")
    assert status == 200 and body["channel"]["has_secret"] is True
    assert WHSEC not in json.dumps(body) and "/in" not in json.dumps(body)
    assert gw.get("/v1/alert-channels/ops", token=op["globex"])[0] == 404
    assert gw.get("/v1/alert-channels/ops", token=op["client"])[0] == 403
    auth = {"Authorization": f"Bearer {gw.token}"}
    client = gw_app.test_client()
    r = client.patch("/v1/alert-channels/ops", json={"kinds": ["backlog"],
                                                    "remind_after_seconds": 0}, headers=auth)
    assert r.status_code == 200, r.get_json()
    assert r.get_json()["channel"]["kinds"] == ["backlog"]
    assert r.get_json()["channel"]["remind_after_seconds"] == 0
    r = client.patch("/v1/alert-channels/ops", json={"url": "http://169.254.169.254/"},
                     headers=auth)
    assert r.status_code == 400
    assert client.delete("/v1/alert-channels/ops", headers=auth).status_code == 200
    assert client.delete("/v1/alert-channels/ops", headers=auth).status_code == 404
    _channel(gw, name="ops", kind="slack", url=sink.url)  # the name may be used again


class _Inbox:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's API)
        self.messages.append(envelope)
        return "250 OK"


@pytest.fixture
def smtp():
    from aiosmtpd.controller import Controller

    from tests.support import free_port
    inbox = _Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield inbox, f"smtp://127.0.0.1:{controller.port}?from=keystore@example.org"
    controller.stop()


def test_email_is_received_by_a_real_smtp_server(database_url, clock, smtp, sink):
    from email import message_from_bytes

    from keystore_service.app import create_app
    from keystore_service.settings import Settings
    from tests.support import Http

    from .support import KEY
    inbox, url = smtp
    app = create_app(Settings(database_url=database_url, secret_key=KEY, smtp_url=url,
                              token_cache_seconds=0), clock)
    try:
        accounts = app.extensions["keystore"].accounts
        accounts.create_tenant("acme", clock.now)
        gw = Http(app.test_client(), accounts.create_token("acme", "operator", None, clock.now))
        _channel(gw, name="mail", kind="email", to="oncall@example.com")
        _backlog(app, gw, sink.url)
        _gw(app).issues.watch()
        _drain(app)
        [envelope] = inbox.messages
        assert envelope.rcpt_tos == ["oncall@example.com"]
        msg = message_from_bytes(envelope.content)
        assert msg["Subject"].startswith("[keystore] Issue opened: backlog shop")
        assert msg["From"] == "keystore@example.org"
        assert msg["Idempotency-Key"].startswith("issue-")
        assert "/ui/issues#issue-" in msg.get_payload()
    finally:
        app.extensions["keystore"].database.engine.dispose()


def test_email_channels_need_keystore_smtp_url(gw):
    status, body, _ = gw.post("/v1/alert-channels", {"name": "mail", "kind": "email",
                                                     "to": "oncall@example.com"})
    assert status == 400 and "KEYSTORE_SMTP_URL" in body["error"]["message"]


def test_metrics_count_open_issues_by_kind_and_notices(gw_app, gw, sink):
    hook = type(sink)(answer=lambda n, r: 404)
    try:
        _channel(gw, name="ops", kind="slack", url=sink.url)
        _channel(gw, name="gone", kind="webhook", url=hook.url)
        _backlog(gw_app, gw, sink.url)
        _gw(gw_app).issues.watch()
        _drain(gw_app)
        text = gw_app.test_client().get("/metrics").get_data(as_text=True)
        assert 'keystore_issues_open{kind="backlog"} 1.0' in text
        assert 'keystore_issues_open{kind="send_unresolved"} 0.0' in text
        assert 'keystore_alert_notices_total{outcome="sent"} 1.0' in text
        assert 'keystore_alert_notices_total{outcome="failed"} 1.0' in text  # 404: given up
    finally:
        hook.close()


def test_the_daily_report_goes_once_a_day_to_channels_that_ask(gw_app, gw, op, sink, clock):
    hook = type(sink)()
    try:
        _channel(gw, name="daily", kind="slack", url=hook.url, daily_report=True)
        _channel(gw, name="quiet", kind="slack", url=sink.url)
        client_http = type(gw)(gw.client, op["client"])
        client_http.post("/v1/claim", {"scope": "create_invoice", "key": "k1"})
        clock.advance(86_400)
        alerts = _gw(gw_app).alerts
        assert alerts.reports_due() == 1
        assert alerts.reports_due() == 0  # that day's report went (or is on its way)
        _drain(gw_app)
        [got] = hook.requests
        text = json.loads(got["body"])["text"]
        assert text.startswith("Daily report 2027-01-15:") and "create_invoice: claimed 1" in text
        assert sink.requests == []
        clock.advance(86_400)
        assert alerts.reports_due() == 1
    finally:
        hook.close()


@pytest.mark.parametrize("name", ["%00", "a" * 65, "Ops", "%0d%0aX", "%2E%2E", "東京",
                                  "9" * 400])
def test_odd_channel_names_in_the_path_are_404(gw, name):
    for path in (f"/v1/alert-channels/{name}", f"/v1/alert-channels/{name}/test"):
        status, body, _ = (gw.get if path.endswith(name) else gw.post)(path)
        assert status == 404 and body["error"]["code"] == "not_found", path


@pytest.mark.parametrize("url", ["http://127.0.0.1/" + "a" * 2048, "http://exämple.org/",
                                 "https://[fe80::1]/", "http://[fd00:ec2::254]/",
                                 "http://0x7f.1/", "http://127.1/", "javascript:alert(1)"])
def test_channel_urls_the_destination_rules_refuse(gw, url):
    status, body, _ = gw.post("/v1/alert-channels", {"name": "ops", "kind": "slack",
                                                     "url": url})
    assert status == 400 and body["error"]["code"] == "invalid_request", url
