"""Running gunicorn yourself with the documented config module gets what `keystore serve`
sets up: gthread workers, metrics summed over the workers, the background jobs, the
migrated database and the first-start operator token; and neither way of serving leaves its
metrics directory behind in the temporary directory."""
from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.engine import make_url

from tests.conftest import PG_ADMIN_URL
from tests.support import Api, Server


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fresh_url(request, tmp_path):
    """A database nobody has migrated yet."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/fresh/keystore.db"
        return
    admin = request.getfixturevalue("pg_admin")
    name = f"keystore_gconf_{os.getpid()}_{secrets.token_hex(3)}"
    admin.execute(f'CREATE DATABASE "{name}"')
    yield make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def gunicorn(database_url: str, tmp: Path, **env: str) -> Server:
    """`gunicorn -c python:keystore_service.gunicorn_conf` as the docs show it, three workers,
    in `tmp` (its TMPDIR and working directory), its stdout and stderr in two files."""
    return Server(database_url, workers=3, gunicorn=True, cwd=tmp, env={"TMPDIR": str(tmp),
                  **env}, log_path=tmp / "stdout.log", err_path=tmp / "stderr.log")


def claims_of(url: str, scope: str) -> float:
    text = requests.get(url + "/metrics", timeout=10).text
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "keystore_claims_total" and s.labels.get("scope") == scope)


def metrics_dirs(tmp: Path) -> list:
    return sorted(p.name for p in tmp.glob("keystore-metrics-*"))


def test_gunicorn_with_the_config_module_serves_like_keystore_serve(fresh_url, tmp_path):
    g = gunicorn(fresh_url, tmp_path, KEYSTORE_RECONCILE_INTERVAL_SECONDS="1").start()
    try:
        assert len(metrics_dirs(tmp_path)) == 1
        tokens = [w for w in g.log_path.read_text().split() if w.startswith("ks_")]
        assert len(tokens) == 1  # the first start's operator token, on stdout
        log = g.err_path.read_text()
        assert "Using worker: keystore_service.server.EnvelopeWorker" in log  # gthread
        assert "keystore: database" in log
        assert "keystore: migrated the schema from (none)" in log and "INFO  [alembic" not in log
        api = Api(g.url, tokens[0])
        status, body, _ = api.post("/v1/expire", {"scope": "s", "key": "k"})
        assert (status, body["error"]["code"]) == (404, "not_found")  # an operator token

        for n in range(30):  # a new connection each: they spread over the three workers
            assert Api(g.url, tokens[0]).post("/v1/claim", {"scope": "m", "key": f"k{n}"})[0] \
                == 201
        assert {claims_of(g.url, "m") for _ in range(6)} == {30.0}  # summed on every scrape

        api.post("/v1/claim", {"scope": "bg", "key": "k", "lease_seconds": 1})
        deadline = time.monotonic() + 15  # nothing but the background reconciler touches it
        while api.get("/v1/keys", scope="bg", key="k")[1]["record"]["state"] != \
                "needs_reconciliation":
            assert time.monotonic() < deadline, "the reconciler timer did not run"
            time.sleep(0.2)
    finally:
        g.stop()
    assert metrics_dirs(tmp_path) == []  # removed at exit

    again = gunicorn(fresh_url, tmp_path).start()
    again.stop()
    assert len([w for w in again.log_path.read_text().split() if w.startswith("ks_")]) == 1  # once


def test_keystore_serve_removes_its_metrics_directory_when_it_stops(database_url, tmp_path):
    server = Server(database_url, workers=2, env={"TMPDIR": str(tmp_path)},
                    log_path=tmp_path / "serve.log").start()
    try:
        assert len(metrics_dirs(tmp_path)) == 1
    finally:
        server.stop()
    assert server.proc.returncode == 0
    assert metrics_dirs(tmp_path) == []
