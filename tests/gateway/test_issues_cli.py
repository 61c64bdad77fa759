"""`keystore issue ...` and `keystore channel ...` as an operator runs them, against the same
database as the service under test, on both backends."""
from __future__ import annotations

import json
import os
import subprocess

from tests.support import KEYSTORE

from .support import KEY, create_source, signed


def cli(database_url: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "KEYSTORE_DATABASE_URL": database_url, "KEYSTORE_SECRET_KEY": KEY}
    return subprocess.run([KEYSTORE, *args], env=env, capture_output=True, text=True,
                          input=stdin, timeout=60)


def test_channels_on_the_command_line(database_url, gw_app, gw, sink):
    url = sink.url + "/services/T0/B0/SECRETPATH"
    made = cli(database_url, "channel", "create", "--tenant", "acme", "--name", "ops",
               "--kind", "slack", "--url", "-", "--kind-told", "backlog", stdin=url + "\n")
    assert made.returncode == 0, made.stderr
    listed = cli(database_url, "channel", "list", "--tenant", "acme")
    [row] = [json.loads(line) for line in listed.stdout.splitlines()]
    assert row["kinds"] == ["backlog"] and "SECRETPATH" not in listed.stdout
    tested = cli(database_url, "channel", "test", "--tenant", "acme", "ops")
    assert tested.returncode == 0, tested.stderr
    [got] = sink.requests
    assert got["path"] == "/in/services/T0/B0/SECRETPATH"
    assert json.loads(got["body"])["text"].startswith("Test notice")
    for bad in (["--url", "http://169.254.169.254/"], ["--remind-after", "3"],
                ["--url", "http://127.0.0.1/", "--to", "a@b.example"]):
        refused = cli(database_url, "channel", "create", "--tenant", "acme", "--name", "x",
                      "--kind", "slack", *bad)
        assert refused.returncode != 0 and "Traceback" not in refused.stderr, bad
    assert cli(database_url, "channel", "delete", "--tenant", "acme", "ops").returncode == 0
    assert cli(database_url, "channel", "delete", "--tenant", "acme", "ops").returncode != 0


def test_issues_on_the_command_line(database_url, gw_app, gw, sink):
    source = create_source(gw, gw.token, sink.url, backlog_alert_seconds=0)
    body = b'{"n": 1}'
    path = "/hooks/" + source["ingest_url"].rsplit("/", 1)[1]
    assert gw_app.test_client().post(path, data=body, headers=signed(body, "e1")).status_code \
        == 202
    gw_app.extensions["keystore"].gateway.issues.watch()
    listed = cli(database_url, "issue", "list", "--tenant", "acme", "--state", "open")
    [issue] = [json.loads(line) for line in listed.stdout.splitlines()]
    assert issue["kind"] == "backlog" and issue["subject"] == "shop"
    acked = cli(database_url, "issue", "ack", "--tenant", "acme", "--by", "mia", str(issue["id"]))
    assert acked.returncode == 0, acked.stderr
    [issue] = [json.loads(line) for line in cli(database_url, "issue", "list", "--tenant",
                                                "acme").stdout.splitlines()]
    assert (issue["state"], issue["acknowledged_by"]) == ("acknowledged", "mia")
    for bad in ("٣", "0", str(2 ** 63), "x"):
        refused = cli(database_url, "issue", "resolve", "--tenant", "acme", bad)
        assert refused.returncode != 0 and "Traceback" not in refused.stderr, bad
    assert cli(database_url, "issue", "resolve", "--tenant", "globex",
               str(issue["id"])).returncode != 0
    assert cli(database_url, "issue", "resolve", "--tenant", "acme",
               str(issue["id"])).returncode == 0
