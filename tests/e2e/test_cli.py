"""The `keystore` command: tokens printed alone on stdout, the first-start bootstrap."""
from __future__ import annotations

from tests.support import Api, Server, keystore_cli, new_token


def test_token_create_prints_the_token_alone_on_stdout(database_url):
    keystore_cli(database_url, "tenant", "create", "acme")
    out = keystore_cli(database_url, "token", "create", "--tenant", "acme", "--role", "operator")
    assert out.stdout.count("\n") == 1 and out.stdout.startswith("ks_")
    assert "not shown again" in out.stderr
    again = keystore_cli(database_url, "tenant", "create", "acme", check=False)
    assert again.returncode != 0 and "exists already" in again.stderr
    missing = keystore_cli(database_url, "token", "create", "--tenant", "nope", check=False)
    assert missing.returncode != 0 and "no tenant" in missing.stderr


def test_first_start_creates_default_and_prints_one_operator_token(database_url, tmp_path):
    log = tmp_path / "serve.log"
    server = Server(database_url, workers=2, log_path=log).start()
    server.stop()
    text = log.read_text()
    tokens = [w for w in text.split() if w.startswith("ks_")]
    assert len(tokens) == 1
    server = Server(database_url, workers=2, log_path=log).start()
    try:
        assert [w for w in log.read_text().split() if w.startswith("ks_")] == tokens  # once
        api = Api(server.url, tokens[0])
        status, body, _ = api.post("/v1/expire", {"scope": "s", "key": "k"})
        assert (status, body["error"]["code"]) == (404, "not_found")  # operator: not 403
    finally:
        server.stop()


def test_invalid_configuration_is_refused_with_a_clear_message(tmp_path):
    out = keystore_cli("mysql://x", "db", "upgrade", check=False)
    assert out.returncode != 0 and "KEYSTORE_DATABASE_URL" in out.stderr


def test_two_instances_side_by_side_share_one_store(database_url, tmp_path):
    token = new_token(database_url, "shared")
    a = Server(database_url, workers=1, log_path=tmp_path / "a.log").start()
    b = Server(database_url, workers=1, log_path=tmp_path / "b.log").start()
    try:
        assert a.proc.pid != b.proc.pid and a.port != b.port
        on_a, on_b = Api(a.url, token), Api(b.url, token)
        body = {"scope": "invoice", "key": "evt-1", "payload": {"amount": 5}}
        status, claimed, _ = on_a.post("/v1/claim", body)
        assert status == 201
        status, held, _ = on_b.post("/v1/claim", body)  # a's lease is seen by b
        assert (status, held["outcome"]) == (409, "in_progress")
        status, _, _ = on_a.post("/v1/complete", {
            "scope": "invoice", "key": "evt-1", "lease_token": claimed["lease_token"],
            "state": "succeeded", "result": {"resource_id": "INV-1"}})
        assert status == 200
        status, replay, headers = on_b.post("/v1/claim", body)
        assert (status, replay["outcome"], headers["Idempotent-Replayed"]) == \
            (200, "replay", "true")
        assert replay["record"]["result"]["resource_id"] == "INV-1"
        assert replay["record"]["duplicate_count"] == 2  # b's two repeats, on the one record
    finally:
        a.stop()
        b.stop()
