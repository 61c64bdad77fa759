"""Logs carry ids, never payloads, results or tokens: a full session through a real server
(access log on), then the captured log is searched for every secret value it used."""
from __future__ import annotations

import json
import socket

import requests

from tests.gateway.support import KEY
from tests.support import Server, new_token

SECRETS = {"payload": "PAYLOAD-s3cr3t-7781", "result": "RESULT-BODY-s3cr3t-4410",
           "reason": "REASON-s3cr3t-0931", "bad_json": "MALFORMED-s3cr3t-5521"}


def test_no_secret_reaches_the_log(database_url, tmp_path):
    token = new_token(database_url, "logs", "operator")
    log = tmp_path / "server.log"
    server = Server(database_url, workers=2, log_path=log,
                    env={"KEYSTORE_ACCESS_LOG": "true", "KEYSTORE_LOG_LEVEL": "DEBUG",
                         "KEYSTORE_SECRET_KEY": KEY}).start()
    s, h = requests.Session(), {"Authorization": f"Bearer {token}"}
    try:
        ingest_ids = _deliveries(s, server.url, h)
        ref = {"scope": "invoice", "key": "evt-1"}
        claimed = s.post(server.url + "/v1/claim", headers=h, json={
            **ref, "payload": {"card": SECRETS["payload"]}}).json()
        lease = claimed["lease_token"]
        s.post(server.url + "/v1/extend", headers=h, json={**ref, "lease_token": lease,
                                                          "lease_seconds": 60})
        s.post(server.url + "/v1/complete", headers=h, json={
            **ref, "lease_token": lease, "state": "succeeded",
            "result": {"body": {"secret": SECRETS["result"]}}})
        s.post(server.url + "/v1/claim", headers=h, json={**ref, "payload": {"card": "other"}})
        s.post(server.url + "/v1/claim", headers=h, json={
            "scope": "invoice", "key": "evt-2", "payload": SECRETS["payload"]})
        s.post(server.url + "/v1/release", headers={**h}, json={
            "scope": "invoice", "key": "evt-2", "lease_token": "lt_wrong",
            "reason": SECRETS["reason"]})
        s.post(server.url + "/v1/claim", headers=h,
               data=b'{"scope":"x","key":"' + SECRETS["bad_json"].encode() + b'", broken')
        s.post(server.url + "/v1/claim", headers={"Authorization": "Bearer ks_" + "x" * 40},
               json=ref)
        s.post(server.url + "/v1/resolve", headers=h, json={**ref, "action": "dismiss"})
        s.get(server.url + "/v1/reviews", headers=h)
        s.get(server.url + "/metrics")
    finally:
        server.stop()
    text = log.read_text()
    assert "POST /v1/claim" in text and "tenant=logs" in text  # the access log was on
    for secret in [*SECRETS.values(), token, lease, "x" * 40]:
        assert secret not in text, f"{secret[:12]}... reached the log"
    for ingest_id in ingest_ids:  # issue 25, item 11: at most its first 4 characters
        assert ingest_id[:5] not in text and ingest_id[-8:] not in text, "an ingest id"
        assert f"/hooks/{ingest_id[:4]}\u2026" in text


def _deliveries(s: requests.Session, url: str, h: dict) -> list[str]:
    """Deliveries to an unsigned source (its ingest id is its only credential) and to a
    signed one, good and bad, at the id's path and at paths a misconfigured sender uses."""
    ids = []
    for name, extra in (("open", {"signature": None}),
                        ("signed", {"secrets": ["sig-s3cr3t"], "signature": {
                            "header": "X-Sig", "algorithm": "sha256", "encoding": "hex"}})):
        created = s.post(url + "/v1/sources", headers=h, json={
            "name": name, "provider": "generic", "event_id": {"json": ["/id"]},
            "destination": {"url": "http://127.0.0.1:9/"}, **extra}).json()
        ids.append(created["source"]["ingest_url"].rsplit("/", 1)[1])
    for ingest_id in ids:
        for path in (f"/hooks/{ingest_id}", f"/hooks/{ingest_id}/", f"//hooks/{ingest_id}",
                     f"/HOOKS/{ingest_id}", f"/hooks/{ingest_id}/x?y=1"):
            for headers in ({}, {"X-Sig": "00" * 32}):
                s.post(url + path, data=b'{"id": "e-1"}', headers=headers, timeout=10)
        s.post(url + f"/hooks/{ingest_id}", data=b"{" + b" " * (2 * 1024 * 1024),
               headers={"Transfer-Encoding": "chunked"}, timeout=30)
    return ids


FORGED = "2026-11-30 12:00:00,000 INFO keystore.access: forged"


def test_request_input_cannot_forge_or_break_a_log_line(database_url, tmp_path):
    """Issue 13, items 8 and 15: a URL-encoded newline in an unauthenticated path wrote a
    forged line into the access log (on /v1 and /ui alike); gunicorn's own refusals were
    HTML pages, and its log line quoted the request."""
    log = tmp_path / "server.log"
    server = Server(database_url, workers=1, log_path=log,
                    env={"KEYSTORE_ACCESS_LOG": "true"}).start()
    marker = "LINE-s3cr3t-2291"
    try:
        for path in (f"/v1/x%0a{FORGED}", f"/ui/x%0d%0a{FORGED}", f"/nope%e2%80%a8{FORGED}",
                     f"/v1/claim%1b[31m{FORGED}"):
            r = requests.get(server.url + path.replace(" ", "%20"), timeout=10)
            assert r.status_code in (401, 404), (path, r.status_code)
        answers = {
            "uri_too_long": requests.get(f"{server.url}/v1/{marker}{'a' * 5000}", timeout=10),
            "headers_too_large": requests.get(server.url + "/healthz", timeout=10,
                                              headers={"X-Big": marker + "a" * 9000}),
        }
        for code, r in answers.items():
            assert r.headers["Content-Type"] == "application/json"
            assert r.json()["error"]["code"] == code and r.status_code in (414, 431)
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(f"GET /{marker}\x01 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            raw = s.recv(4096)
        head, _, body = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 ") and b"application/json" in head
        assert json.loads(body)["error"]["code"] == "invalid_request"
    finally:
        server.stop()
    lines = log.read_text().splitlines()
    assert sum("forged" in line for line in lines) == 4  # each on its own request's line
    assert not any(line.startswith(FORGED) for line in lines)
    assert not any(marker in line for line in lines)
    assert any('\\x0a2026-11-30' in line for line in lines)
