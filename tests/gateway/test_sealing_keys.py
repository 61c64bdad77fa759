"""Sealing keys must agree (issue 25, item 4): the database keeps a check value sealed with
the key that sealed its secrets; a process whose keys cannot open it seals nothing and
`serve` / `relay` do not start, naming the setting; no key file is made for a database that
holds sealed data; a source no configured key opens is broken (503 to its provider, health
"broken" in the list) and nothing else is. On both backends, with real processes."""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import delete

from keystore_service.app import create_app
from keystore_service.settings import Settings
from keystore_service.storage.tables import sealing_check
from tests.support import KEYSTORE, T0, Http, free_port

from .support import KEY, create_source, deliver, pump

OTHER = Fernet.generate_key().decode()  # a key that sealed nothing here
SETTING = "KEYSTORE_SECRET_KEY"


def run(database_url: str, *args: str, key=None, timeout: float = 60, stdin: str = "",
        cwd=None) -> subprocess.CompletedProcess:
    """`keystore ...` with KEYSTORE_SECRET_KEY=`key` (unset when None)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEYSTORE_SECRET_KEY")}
    env["KEYSTORE_DATABASE_URL"] = database_url
    if key is not None:
        env["KEYSTORE_SECRET_KEY"] = key
    return subprocess.run([KEYSTORE, *args], env=env, capture_output=True, text=True,
                          input=stdin, timeout=timeout, cwd=cwd)


def create_on_cli(database_url: str, name: str, key, destination="http://127.0.0.1:9/x"):
    return run(database_url, "source", "create", "--tenant", "acme", "--name", name,
               "--provider", "stripe", "--secret", "-", "--destination", destination,
               key=key, stdin="whsec_second_shell")


def started(database_url: str, args: list[str], key: str, within: float = 40):
    """A `keystore serve|relay` that should refuse to start: (returncode, stderr); one still
    running after `within` seconds is stopped and reported as None."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEYSTORE_SECRET_KEY")}
    env.update(KEYSTORE_DATABASE_URL=database_url, KEYSTORE_SECRET_KEY=key)
    proc = subprocess.Popen([KEYSTORE, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=within)
        return proc.returncode, err
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        return None, err


def test_a_command_with_another_key_refuses_to_seal_and_names_the_setting(
        database_url, gw, sink, backend):
    create_source(gw, gw.token, sink.url)
    refused = create_on_cli(database_url, "second-shell", OTHER)
    assert refused.returncode == 1, refused.stderr
    if backend == "sqlite":  # no key file beside the database either
        assert not Path(database_url.removeprefix("sqlite:///")).with_suffix(".key").exists()
    assert SETTING in refused.stderr and "Traceback" not in refused.stderr
    assert OTHER not in refused.stderr + refused.stdout and KEY not in refused.stderr
    assert "/hooks/" not in refused.stdout  # no ingest URL printed for a source never made
    status, body, _ = gw.get("/v1/sources")
    assert status == 200 and [s["name"] for s in body["sources"]] == ["shop"]
    assert body["sources"][0]["health"] == "ok"
    # the same command with the key the service uses seals as before
    made = create_on_cli(database_url, "second-shell", KEY)
    assert made.returncode == 0 and "/hooks/" in made.stdout, made.stderr


def test_no_key_file_is_made_for_a_database_that_holds_sealed_data(
        sqlite_template, tmp_path, clock):
    """The new user's second shell: no KEYSTORE_SECRET_KEY, the service's key from the
    environment, so no key file beside the database. The command must not make one."""
    db = tmp_path / "keystore.db"
    db.write_bytes(sqlite_template.read_bytes())
    url = f"sqlite:///{db}"
    app = create_app(Settings(database_url=url, secret_key=KEY, token_cache_seconds=0), clock)
    try:
        accounts = app.extensions["keystore"].accounts
        accounts.create_tenant("acme", T0)
        token = accounts.create_token("acme", "operator", None, T0)
        http = Http(app.test_client(), token)
        create_source(http, token, "http://127.0.0.1:9/x")
        refused = create_on_cli(url, "second-shell", None)
        assert refused.returncode == 1, refused.stderr
        assert SETTING in refused.stderr and "Traceback" not in refused.stderr
        assert not db.with_suffix(".key").exists()
        listed = run(url, "source", "list", "--tenant", "acme")  # reading still works
        assert listed.returncode == 0 and "shop" in listed.stdout, listed.stderr
        assert not db.with_suffix(".key").exists()
        status, body, _ = http.get("/v1/sources")
        assert status == 200 and [s["name"] for s in body["sources"]] == ["shop"]
    finally:
        app.extensions["keystore"].database.engine.dispose()


def test_serve_and_relay_refuse_to_start_with_keys_that_cannot_open_the_database(
        database_url, gw, sink):
    create_source(gw, gw.token, sink.url)
    for args in (["serve", "--port", str(free_port()), "--workers", "1"], ["relay"]):
        code, err = started(database_url, args, OTHER)
        assert code is not None, f"`keystore {args[0]}` started with another key"
        assert code != 0 and SETTING in err and "Traceback" not in err, (args, err)
        assert OTHER not in err and KEY not in err
    code, err = started(database_url, ["relay", "--progress", "0"], KEY, within=3)
    assert code is None, err  # with the right key it runs (stopped by the test)


def test_rotation_keeps_the_check_value_sealed_with_the_first_key(database_url, gw, sink):
    create_source(gw, gw.token, sink.url)
    rotated = create_on_cli(database_url, "rotated", f"{OTHER},{KEY}")  # the new key first
    assert rotated.returncode == 0, rotated.stderr
    # the check value now opens with the new key alone, and no longer with the old alone
    assert create_on_cli(database_url, "new-only", OTHER).returncode == 0
    old_only = create_on_cli(database_url, "old-only", KEY)
    assert old_only.returncode == 1 and SETTING in old_only.stderr


def test_a_source_no_configured_key_opens_is_broken_and_nothing_else_is(
        database_url, gw_app, gw, op, sink, clock, forwarding):
    old = create_source(gw, gw.token, sink.url, name="old")  # sealed with KEY
    assert deliver(gw, old, event_id="evt_before")[0] == 202  # accepted while it opened
    rotating = create_app(Settings(database_url=database_url, secret_key=f"{OTHER},{KEY}",
                                   token_cache_seconds=0), clock)
    fine = create_source(Http(rotating.test_client(), gw.token), gw.token, sink.url,
                         name="fine")
    # KEY is dropped before "old" was sealed again: "old" cannot be opened any more
    after = create_app(Settings(database_url=database_url, secret_key=OTHER,
                                token_cache_seconds=0), clock)
    http = Http(after.test_client(), gw.token)
    try:
        status, body, headers = deliver(http, old)
        assert status == 503 and body["error"]["code"] == "unavailable", body
        assert headers["Retry-After"] == "60"  # a person mends it, not the next second
        assert "Traceback" not in str(body) and OTHER not in str(body)
        assert deliver(http, fine)[0] == 202
        status, body, _ = http.get("/v1/sources")
        assert status == 200, body
        health = {s["name"]: (s["health"], s["ingest_url"] is None) for s in body["sources"]}
        assert health == {"old": ("broken", True), "fine": ("ok", False)}
        status, body, _ = http.get("/v1/sources/old")
        assert status == 200 and body["source"]["health"] == "broken"
        auth = {"Authorization": f"Bearer {gw.token}"}
        r = after.test_client().patch("/v1/sources/old", json={"max_in_flight": 2},
                                      headers=auth)
        status, body = r.status_code, r.get_json()
        assert status == 503 and body["error"]["code"] == "unavailable", body
        assert SETTING in body["error"]["message"]
        r = after.test_client().delete("/v1/sources/old", headers=auth)  # still disabled
        status, body = r.status_code, r.get_json()
        assert status == 200 and body["source"]["health"] == "broken"
        # its accepted event is tried and counted as a failed attempt, not a crash
        outcomes = pump(after.extensions["keystore"].gateway.forwarding)
        assert sorted(o or "" for o in outcomes) == ["delivered", "retry"], outcomes
        status, body, _ = http.get("/v1/deliveries", event_id="evt_before")
        assert body["deliveries"][0]["state"] == "queued"
        # a process still on the old key alone seals nothing through the API either
        status, body, headers = Http(gw_app.test_client(), gw.token).post("/v1/sources", {
            "name": "late", "provider": "testing", "secrets": ["s"],
            "destination": {"url": sink.url}})
        assert status == 503 and body["error"]["details"] == {
            "reason": "secret_key_mismatch", "setting": SETTING}, body
        assert headers["Retry-After"] == "60" and KEY not in str(body)
        assert http.get("/v1/sources/late")[0] == 404
    finally:
        for a in (rotating, after):
            a.extensions["keystore"].database.engine.dispose()


@pytest.mark.parametrize("value", ["", ",", " , ", "not-a-key"])
def test_keys_that_are_not_keys_are_refused_by_name(database_url, value, tmp_path: Path):
    got = run(database_url, "source", "list", "--tenant", "acme", key=value, timeout=30)
    if value.strip(" ,"):
        assert got.returncode != 0 and SETTING in got.stderr and "Traceback" not in got.stderr
    else:
        assert "Traceback" not in got.stderr


def test_two_first_seals_with_different_keys_at_once_agree_on_one(database_url, gw_app, op):
    """Nothing sealed yet; two shells create a source at the same moment, each with its own
    key: the first check value written wins, the other command refuses (either order)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEYSTORE_SECRET_KEY")}
    procs = [subprocess.Popen(
        [KEYSTORE, "source", "create", "--tenant", "acme", "--name", f"s{n}", "--provider",
         "stripe", "--secret", "whsec_x", "--destination", "http://127.0.0.1:9/x"],
        env={**env, "KEYSTORE_DATABASE_URL": database_url, "KEYSTORE_SECRET_KEY": key},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for n, key in enumerate((KEY, OTHER))]
    done = [(p.wait(timeout=60), p.stderr.read()) for p in procs]
    assert sorted(code for code, _ in done) == [0, 1], done
    assert all(SETTING in err for code, err in done if code), done
    assert "Traceback" not in "".join(err for _, err in done)


def test_a_database_sealed_before_check_values_adopts_the_keys_that_open_it(
        database_url, gw_app, gw, sink):
    """A database of a release without check values (its row removed here): keys that open
    none of its sources do not start; the first process whose keys open one writes it."""
    create_source(gw, gw.token, sink.url)
    with gw_app.extensions["keystore"].database.engine.begin() as conn:
        conn.execute(delete(sealing_check))
    code, err = started(database_url, ["relay"], OTHER)
    assert code == 1 and SETTING in err and "open none" in err, err
    code, err = started(database_url, ["relay", "--progress", "0"], KEY, within=8)
    assert code is None and "forwarding as" in err, err  # it wrote the check value first
    refused = create_on_cli(database_url, "second-shell", OTHER)
    assert refused.returncode == 1 and "check value" in refused.stderr, refused.stderr
