"""Logs carry ids, never payloads, results or tokens: a full session through a real server
(access log on), then the captured log is searched for every secret value it used."""
from __future__ import annotations

import requests

from tests.support import Server, new_token

SECRETS = {"payload": "PAYLOAD-s3cr3t-7781", "result": "RESULT-BODY-s3cr3t-4410",
           "reason": "REASON-s3cr3t-0931", "bad_json": "MALFORMED-s3cr3t-5521"}


def test_no_secret_reaches_the_log(database_url, tmp_path):
    token = new_token(database_url, "logs", "operator")
    log = tmp_path / "server.log"
    server = Server(database_url, workers=2, log_path=log,
                    env={"KEYSTORE_ACCESS_LOG": "true", "KEYSTORE_LOG_LEVEL": "DEBUG"}).start()
    s, h = requests.Session(), {"Authorization": f"Bearer {token}"}
    try:
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
