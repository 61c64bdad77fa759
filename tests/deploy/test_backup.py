"""`keystore db backup` / `restore` on both backends: a backup taken while claims and
completions run holds every completion acknowledged before it started, and a service on
the restored copy answers their repeats with the stored results. Restores refuse what would
lose or mix data, with a clear message and no traceback."""
from __future__ import annotations

import os
import stat
import subprocess
import threading
import time

import requests

from keystore_service.storage import backup
from tests.support import KEYSTORE, Server, keystore_cli, new_token

LOAD_THREADS = 4  # concurrent claim -> complete loops, as several workflows would be


def load(base: str, token: str, stop: threading.Event, acked: list, prefix: str) -> None:
    """Claim and complete new keys until `stop`; append (monotonic time of the answer, key)
    for every completion the service acknowledged."""
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {token}"
    n = 0
    while not stop.is_set():
        key = f"{prefix}-{n}"
        n += 1
        r = s.post(base + "/v1/claim", timeout=30,
                   json={"scope": "backup", "key": key, "payload": {"n": n}})
        if r.status_code != 201:
            continue  # a 503 under load: nothing acknowledged, nothing to find later
        r = s.post(base + "/v1/complete", timeout=30, json={
            "scope": "backup", "key": key, "lease_token": r.json()["lease_token"],
            "state": "succeeded", "result": {"resource_id": f"R-{key}"}})
        if r.status_code == 200:
            acked.append((time.monotonic(), key, n))


def test_a_backup_under_load_restores_every_acknowledged_completion(
        database_url, empty_database, tmp_path):
    token = new_token(database_url, "acme")
    server = Server(database_url, workers=2).start()
    stop, acked = threading.Event(), []
    threads = [threading.Thread(target=load, args=(server.url, token, stop, acked, f"t{i}"))
               for i in range(LOAD_THREADS)]
    backup_file = tmp_path / "keystore.backup"
    try:
        for t in threads:
            t.start()
        time.sleep(1.5)  # some completions first
        # In-process, so that "started" is the moment the copy starts, not a second earlier
        # while a CLI process imports its modules (during which SQLite's checkpoints would
        # move recent commits into the main file and hide a backup that ignores the WAL).
        started = time.monotonic()
        done = backup.backup(database_url, backup_file)
        finished = time.monotonic()
        time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        server.stop()
    assert done.revision and done.bytes == backup_file.stat().st_size
    assert stat.S_IMODE(os.stat(backup_file).st_mode) == 0o600
    before = [(key, n) for at, key, n in acked if at < started]
    during = [key for at, key, _ in acked if started <= at <= finished]
    assert len(before) > 20 and during, "the load was not running around the backup"

    fresh = empty_database()
    keystore_cli(fresh, "db", "restore", str(backup_file))
    restored = Server(fresh, workers=2).start()
    try:
        s = requests.Session()
        s.headers["Authorization"] = f"Bearer {token}"  # the tokens came back too
        for key, n in before:
            r = s.post(restored.url + "/v1/claim", timeout=30,
                       json={"scope": "backup", "key": key, "payload": {"n": n}})
            assert (r.status_code, r.json()["outcome"]) == (200, "replay"), (key, r.text)
            assert r.json()["record"]["result"]["resource_id"] == f"R-{key}"
    finally:
        restored.stop()


def test_restore_refuses_a_database_that_has_tables(database_url, empty_database, tmp_path):
    backup_file = tmp_path / "b"
    keystore_cli(database_url, "db", "backup", str(backup_file))
    token = new_token(database_url, "kept")
    refused = keystore_cli(database_url, "db", "restore", str(backup_file), check=False)
    assert refused.returncode == 1 and "already has tables" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert new_token(database_url, "kept") != token  # still there: the tenant existed
    forced = keystore_cli(database_url, "db", "restore", "--force", str(backup_file),
                          check=False)
    assert forced.returncode == 0, forced.stderr


def test_restore_refuses_what_is_not_a_backup_of_its_backend(empty_database, tmp_path):
    target = empty_database()
    junk = tmp_path / "junk"
    junk.write_bytes(b"not a backup\r\n\x00")
    out = keystore_cli(target, "db", "restore", str(junk), check=False)
    assert out.returncode == 1 and "not a backup" in out.stderr and "Traceback" not in out.stderr
    other = tmp_path / "other"
    if target.startswith("sqlite"):
        other.write_bytes(b"PGDMP" + b"\x00" * 64)
        wanted = "postgresql backup"
    else:
        import sqlite3
        sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
        wanted = "sqlite backup"
    out = keystore_cli(target, "db", "restore", str(other), check=False)
    assert out.returncode == 1 and wanted in out.stderr
    missing = keystore_cli(target, "db", "restore", str(tmp_path / "nope"), check=False)
    assert missing.returncode == 1 and "cannot read" in missing.stderr


def test_a_backup_of_a_newer_schema_is_refused(database_url, empty_database, tmp_path):
    from sqlalchemy import create_engine, inspect, text

    from keystore_service.storage.db import normalise_url
    def set_revision(revision: str) -> str:
        engine = create_engine(normalise_url(database_url))
        with engine.begin() as conn:
            was = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
            conn.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})
        engine.dispose()
        return was
    was = set_revision("9999_from_the_future")
    try:
        keystore_cli(database_url, "db", "backup", str(tmp_path / "newer"))
    finally:
        set_revision(was)  # the session's shared PostgreSQL database serves other tests
    target = empty_database()
    out = keystore_cli(target, "db", "restore", str(tmp_path / "newer"), check=False)
    assert out.returncode == 1 and "9999_from_the_future" in out.stderr
    assert "does not know" in out.stderr and "Traceback" not in out.stderr
    engine = create_engine(normalise_url(target))
    try:
        with engine.connect() as conn:
            assert inspect(conn).get_table_names() == []  # nothing was restored
    finally:
        engine.dispose()


def test_backup_errors_are_messages(database_url, tmp_path):
    out = keystore_cli(database_url, "db", "backup", str(tmp_path / "no" / "such" / "dir" / "b"),
                       check=False)
    assert out.returncode == 1 and "cannot write" in out.stderr and "Traceback" not in out.stderr
    if database_url.startswith("postgresql"):
        env = {**os.environ, "KEYSTORE_DATABASE_URL": database_url, "PATH": "/nonexistent"}
        out = subprocess.run([KEYSTORE, "db", "backup", str(tmp_path / "b")], env=env,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 1 and "pg_dump is not installed" in out.stderr
