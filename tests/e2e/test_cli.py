"""The `keystore` command: tokens printed alone on stdout, the first-start bootstrap, and
which database an admin command uses (said on stderr; one without the schema is refused)."""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import secrets
import subprocess

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from keystore_service.storage import migrate
from keystore_service.storage.db import normalise_url
from tests.conftest import PG_ADMIN_URL
from tests.support import KEYSTORE, Api, Server, free_port, keystore_cli, new_token


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


# --- which database an admin command uses ---------------------------------------------------

ADMIN = [("tenant", "create", "acme"), ("token", "create", "--tenant", "default"),
         ("token", "revoke", "--tenant", "default", "--name", "x"), ("report",),
         ("reconcile",), ("sweep",)]


def run_in(cwd, *args, database_url=None):
    """`keystore ARGS` run from `cwd`, with KEYSTORE_DATABASE_URL only if given."""
    env = {k: v for k, v in os.environ.items() if k != "KEYSTORE_DATABASE_URL"}
    if database_url:
        env["KEYSTORE_DATABASE_URL"] = database_url
    return subprocess.run([KEYSTORE, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def schemaless_url(request, tmp_path):
    """A database that exists but has no key store schema (an empty file; an empty database),
    reached with a password in the URL (trust auth ignores it)."""
    if request.param == "sqlite":
        (tmp_path / "empty.db").touch()
        yield f"sqlite:///{tmp_path}/empty.db"
        return
    admin = request.getfixturevalue("pg_admin")
    name = f"keystore_empty_{os.getpid()}_{secrets.token_hex(3)}"
    admin.execute(f'CREATE DATABASE "{name}"')
    yield make_url(PG_ADMIN_URL).set(database=name, password="s3cret-pw").render_as_string(
        hide_password=False)
    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_admin_commands_from_another_directory_refuse_to_create_a_database(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for args in ADMIN:
        out = run_in(elsewhere, *args)  # the default URL: keystore.db in the current directory
        assert out.returncode != 0, (args, out.stderr)
        assert f"database sqlite:///{elsewhere}/keystore.db" in out.stderr, out.stderr
        assert "no key store schema" in out.stderr and "KEYSTORE_DATABASE_URL" in out.stderr
        assert "sqlite:////" in out.stderr  # how to write an absolute path
        assert out.stdout == ""
        assert list(elsewhere.iterdir()) == [], args  # no fresh ./keystore.db left behind


def test_admin_commands_refuse_a_database_without_the_schema(schemaless_url, tmp_path):
    for args in ADMIN:
        out = run_in(tmp_path, *args, database_url=schemaless_url)
        assert out.returncode != 0 and "no key store schema" in out.stderr, (args, out.stderr)
        assert "s3cret-pw" not in out.stderr
    created = run_in(tmp_path, "tenant", "create", "acme", "--create",
                     database_url=schemaless_url)
    assert created.returncode == 0, created.stderr
    assert "s3cret-pw" not in created.stderr
    shown = "sqlite:///" + str(tmp_path / "empty.db") if schemaless_url.startswith("sqlite") \
        else make_url(schemaless_url).render_as_string(hide_password=True)
    assert f"keystore: database {shown}\n" in created.stderr
    assert run_in(tmp_path, "token", "create", "--tenant", "acme",
                  database_url=schemaless_url).stdout.startswith("ks_")


def test_a_token_made_from_another_directory_works_on_the_running_service(tmp_path):
    home = tmp_path / "service"
    home.mkdir()
    url = f"sqlite:///{home}/keystore.db"
    server = Server(url, workers=1, log_path=tmp_path / "serve.log").start()
    try:
        assert f"keystore: database {url}\n" in (tmp_path / "serve.log").read_text()
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        made = run_in(elsewhere, "tenant", "create", "acme", database_url=url)
        assert made.returncode == 0, made.stderr
        token = run_in(elsewhere, "token", "create", "--tenant", "acme", database_url=url)
        status, body, _ = Api(server.url, token.stdout.strip()).post(
            "/v1/claim", {"scope": "s", "key": "k"})
        assert (status, body["outcome"]) == (201, "acquired")
        missing = run_in(elsewhere, "token", "create", "--tenant", "nope", database_url=url)
        assert missing.returncode != 0
        assert f"no tenant 'nope' in {url}" in missing.stderr
    finally:
        server.stop()


def test_relative_sqlite_paths_are_shown_absolute_and_a_password_is_masked(tmp_path):
    (tmp_path / "sub").mkdir()
    migrate.upgrade(f"sqlite:///{tmp_path}/sub/k.db")
    out = run_in(tmp_path, "reconcile", database_url="sqlite:///sub/k.db")
    assert out.returncode == 0, out.stderr
    assert f"keystore: database sqlite:///{tmp_path}/sub/k.db\n" in out.stderr
    unreachable = "postgresql://u:hunter2@127.0.0.1:1/x?password=hunter3"
    for args in (("report",), ("serve", "--port", str(free_port()))):
        bad = run_in(tmp_path, *args, database_url=unreachable)
        assert bad.returncode != 0, bad.stderr
        assert "cannot reach the database postgresql://u:***@127.0.0.1:1/x?password=***: " \
            in bad.stderr, bad.stderr
        assert "hunter2" not in bad.stderr and "hunter3" not in bad.stderr
        assert "Traceback" not in bad.stderr


def test_migrations_are_one_line_and_only_when_something_is_migrated(schemaless_url, tmp_path):
    first = run_in(tmp_path, "db", "upgrade", database_url=schemaless_url)
    assert first.returncode == 0, first.stderr
    head = migrate.current(schemaless_url)[1]
    assert "alembic" not in first.stderr and "INFO" not in first.stderr, first.stderr
    assert [line for line in first.stderr.splitlines() if "migrated" in line] == [
        f"keystore: migrated the schema from (none) to {head}"]
    again = run_in(tmp_path, "db", "upgrade", database_url=schemaless_url)
    assert "migrated" not in again.stderr and "INFO" not in again.stderr
    assert f"keystore: schema at revision {head} (up to date)" in again.stderr
    quiet = run_in(tmp_path, "tenant", "create", "acme", database_url=schemaless_url)
    assert quiet.returncode == 0 and "INFO" not in quiet.stderr and "migrated" not in quiet.stderr


def test_an_older_schema_is_migrated_in_one_line_a_newer_one_refused(schemaless_url, tmp_path):
    migrate.upgrade(schemaless_url, to="0003")
    out = run_in(tmp_path, "tenant", "create", "acme", database_url=schemaless_url)
    assert out.returncode == 0, out.stderr
    assert "INFO" not in out.stderr
    assert f"keystore: migrated the schema from 0003 to {migrate.head()}\n" in out.stderr
    engine = create_engine(normalise_url(schemaless_url), poolclass=NullPool)
    with engine.begin() as conn:  # as if a newer version had migrated it
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999_future'")
    engine.dispose()
    newer = run_in(tmp_path, "token", "create", "--tenant", "acme", database_url=schemaless_url)
    assert newer.returncode != 0 and "Traceback" not in newer.stderr
    assert "9999_future" in newer.stderr and "newer version" in newer.stderr, newer.stderr


def test_report_json_prints_generated_at_in_rfc_3339_like_the_api(database_url):
    new_token(database_url, "default")
    out = keystore_cli(database_url, "report", "--json")
    body = json.loads(out.stdout)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", body["generated_at"]), body
    made = dt.datetime.fromisoformat(body["generated_at"].replace("Z", "+00:00"))
    assert abs((dt.datetime.now(dt.UTC) - made).total_seconds()) < 60
    assert body["date"] == made.date().isoformat() and body["scopes"] == []


def test_a_tenant_name_with_control_characters_is_not_echoed_raw(database_url):
    for args in (("token", "create", "--tenant"), ("report", "--tenant")):
        out = keystore_cli(database_url, *args, "evil\r\nkeystore: created a token", check=False)
        assert out.returncode != 0
        assert "\r" not in out.stderr and "\nkeystore: created" not in out.stderr, out.stderr
        assert "no tenant 'evil\\r\\nkeystore: created a token'" in out.stderr


def test_backup_and_restore_name_their_database_and_tokens_read_right(database_url, tmp_path):
    made = keystore_cli(database_url, "token", "create", "--tenant", "default", "--role",
                        "operator", check=False)
    if "no tenant" in made.stderr:
        keystore_cli(database_url, "tenant", "create", "default")
        made = keystore_cli(database_url, "token", "create", "--tenant", "default", "--role",
                            "operator")
    assert "created an operator token" in made.stderr
    client = keystore_cli(database_url, "token", "create", "--tenant", "default")
    assert "created a client token" in client.stderr
    backup = keystore_cli(database_url, "db", "backup", str(tmp_path / "b"), check=False)
    first = backup.stderr.splitlines()[0]
    assert first.startswith("keystore: database "), backup.stderr


@pytest.mark.parametrize("args", [
    ("serve", "--port", "٨٠٨٠"), ("serve", "--port", "0"), ("serve", "--port", "65536"),
    ("serve", "--workers", "²"), ("sweep", "--batch", "1e3"), ("sweep", "--batch", " 5"),
    ("sweep", "--batch", "99999999999999999999"), ("sweep", "--pause-ratio", "nan"),
    ("sweep", "--pause-ratio", "inf"), ("relay", "--progress", "nan"),
    ("relay", "--concurrency", "٤"), ("deliveries", "--source", "s", "--limit", "-1"),
])
def test_numbers_on_the_command_line_are_ascii_finite_and_in_range(database_url, args):
    # int() reads "٨٠٨٠" as 8080 and click's FloatRange lets "nan" through its bounds
    out = keystore_cli(database_url, *args, check=False)
    assert out.returncode == 2, (args, out.stderr)
    assert "Traceback" not in out.stderr and "Invalid value" in out.stderr
