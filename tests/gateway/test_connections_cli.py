"""`keystore connection ...` and `keystore settlement ...` as an operator runs them, against
the same database as the service under test, on both backends: header values read from
stdin and printed nowhere, the API's rules and messages (exit 1, no traceback), and what the
command made is what the API shows."""
from __future__ import annotations

import json
import os
import subprocess

from tests.support import KEYSTORE

from .support import KEY

SECRET = "sk_cli_9Hq2xW"
CHECK = {"path": "/invoices/{key}", "found": {"pointer": "/id"}, "resource_id": "/id",
         "absent_status": [404]}


def cli(database_url: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "KEYSTORE_DATABASE_URL": database_url, "KEYSTORE_SECRET_KEY": KEY}
    return subprocess.run([KEYSTORE, *args], env=env, capture_output=True, text=True,
                          input=stdin, timeout=60)


def refused(result: subprocess.CompletedProcess) -> bool:
    return result.returncode != 0 and "Traceback" not in result.stderr


def test_connections_on_the_command_line(database_url, gw_app, gw, tmp_path):
    check = tmp_path / "check.json"
    check.write_text(json.dumps(CHECK))
    made = cli(database_url, "connection", "create", "billing", "--tenant", "acme",
               "--base-url", "http://127.0.0.1:9/api", "--header", "Authorization",
               "--header", "X-Team", "--idempotency-header", "Idempotency-Key",
               "--timeout", "5", "--per-minute", "120", "--check-file", str(check),
               stdin=f"Bearer {SECRET}\nops\n")
    assert made.returncode == 0, made.stderr
    shown = json.loads(made.stdout)
    assert shown["headers"] == ["Authorization", "X-Team"]
    assert (shown["timeout_seconds"], shown["rate"]) == (5, {"per_minute": 120})
    assert shown["check"] == {"method": "GET", **CHECK}
    api = gw.get("/v1/connections/billing")[1]["connection"]
    assert api == shown
    conns = gw_app.extensions["keystore"].gateway.connections
    (stored,) = conns.list(gw_app.extensions["keystore"].accounts.tenant_id("acme"))
    assert conns.headers(stored) == {"Authorization": f"Bearer {SECRET}", "X-Team": "ops"}

    listed = cli(database_url, "connection", "list", "--tenant", "acme")
    assert [json.loads(line) for line in listed.stdout.splitlines()] == [shown]
    one = cli(database_url, "connection", "show", "--tenant", "acme", "billing")
    assert json.loads(one.stdout) == shown
    updated = cli(database_url, "connection", "update", "--tenant", "acme", "billing",
                  "--max-in-flight", "2", "--no-rate", "--no-check", "--header", "X-Api-Key",
                  stdin="k2\n")
    assert updated.returncode == 0, updated.stderr
    changed = json.loads(updated.stdout)
    assert (changed["max_in_flight"], changed["rate"], changed["check"], changed["headers"]) \
        == (2, None, None, ["X-Api-Key"])
    assert changed["timeout_seconds"] == 5  # not given: as it was
    outputs = made.stdout + made.stderr + listed.stdout + one.stdout + updated.stdout + \
        updated.stderr
    assert SECRET not in outputs and "k2" not in outputs

    assert cli(database_url, "connection", "delete", "--tenant", "acme",
               "billing").returncode == 0
    assert gw.get("/v1/connections/billing")[0] == 404
    assert refused(cli(database_url, "connection", "delete", "--tenant", "acme", "billing"))
    assert refused(cli(database_url, "connection", "show", "--tenant", "globex", "billing"))


def test_the_api_rules_hold_on_the_command_line(database_url, gw_app, gw, tmp_path):
    bad_check = tmp_path / "bad.json"
    bad_check.write_text(json.dumps({**CHECK, "path": "/a/../b"}))
    not_json = tmp_path / "not.json"
    not_json.write_text("{")
    base = ["connection", "create", "x", "--tenant", "acme", "--base-url"]
    for args, stdin in (
            ([*base, "http://169.254.169.254/"], ""),
            ([*base, "ftp://127.0.0.1/"], ""),
            ([*base, "http://127.0.0.1:9/", "--header", "Host"], "evil\n"),
            ([*base, "http://127.0.0.1:9/", "--header", "X-A"], "a\x01b\n"),
            ([*base, "http://127.0.0.1:9/", "--timeout", "61"], ""),
            ([*base, "http://127.0.0.1:9/", "--per-second", "0"], ""),
            ([*base, "http://127.0.0.1:9/", "--per-second", "1", "--per-minute", "1"], ""),
            ([*base, "http://127.0.0.1:9/", "--check-file", str(bad_check)], ""),
            ([*base, "http://127.0.0.1:9/", "--check-file", str(not_json)], ""),
            (["connection", "create", "Bad Name", "--tenant", "acme", "--base-url",
              "http://127.0.0.1:9/"], ""),
            ([*base, "http://127.0.0.1:9/", "--tenant", "nobody"], "")):
        result = cli(database_url, *args, stdin=stdin)
        assert refused(result), (args, result.stderr)
    assert gw.get("/v1/connections")[1] == {"connections": []}


def test_settlements_on_the_command_line(database_url, gw_app, gw, tmp_path):
    check = tmp_path / "check.json"
    check.write_text(json.dumps(CHECK))
    assert cli(database_url, "connection", "create", "billing", "--tenant", "acme",
               "--base-url", "http://127.0.0.1:9/api").returncode == 0
    put = cli(database_url, "settlement", "set", "orders", "--tenant", "acme", "--connection",
              "billing", "--check-file", str(check), "--on-absent", "release")
    assert put.returncode == 0, put.stderr
    settled = json.loads(put.stdout)
    assert (settled["scope"], settled["connection"], settled["on_absent"]) == \
        ("orders", "billing", "release")
    assert gw.get("/v1/scopes/orders/settlement")[1] == {"settlement": settled}
    shown = cli(database_url, "settlement", "show", "orders", "--tenant", "acme")
    assert json.loads(shown.stdout) == settled
    for args in (["hook:shop", "--connection", "billing", "--on-absent", "review"],
                 ["orders", "--connection", "nope", "--on-absent", "review"],
                 ["orders", "--connection", "billing", "--on-absent", "maybe"]):
        assert refused(cli(database_url, "settlement", "set", *args, "--tenant", "acme",
                           "--check-file", str(check))), args
    assert cli(database_url, "settlement", "delete", "orders", "--tenant",
               "acme").returncode == 0
    assert gw.get("/v1/scopes/orders/settlement")[0] == 404
    assert refused(cli(database_url, "settlement", "show", "orders", "--tenant", "acme"))
