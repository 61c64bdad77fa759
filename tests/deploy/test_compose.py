"""compose.yaml: consistent with the image's interface, the release's tarball and itself,
and brought up for real as docs/deployment.md ("Compose") says, with podman-compose:
`up -d` (n8n's image built by compose from deploy/n8n/Containerfile), the first operator
token from `logs keystore`, a client token by `exec keystore keystore token create`, a claim,
completion and replay from the host on the compose PostgreSQL, and n8n's own test of the
node's credential against http://keystore:8080 with that token; then `down -v`, leaving
nothing behind. No registry is reachable on the CI machines: the postgres and n8n images
are stand-ins built under their names (scripts/ensure-standin-images, tests/deploy/standins/).
scripts/test-deploy runs these with KEYSTORE_TEST_IMAGE set; without it they are skipped."""
from __future__ import annotations

import fnmatch
import json
import re
import time
from pathlib import Path

import pytest
import requests
import yaml
from sqlalchemy.engine import make_url

from keystore_service.settings import Settings

from .compose import CLIENT_TOKEN, DOWN, LOG_TOKEN, LOGS, PODMAN_COMPOSE, STANDINS, UP, Stack
from .podman import IMAGE, figure, podman
from .support import claim_complete_replay

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
DOC = (ROOT / "docs" / "deployment.md").read_text()


def test_the_key_store_points_at_the_compose_postgres():
    services = COMPOSE["services"]
    pg = services["postgres"]["environment"]
    url = make_url(services["keystore"]["environment"]["KEYSTORE_DATABASE_URL"])
    assert (url.host, url.port, url.username, url.password, url.database) == (
        "postgres", 5432, pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"], pg["POSTGRES_DB"])
    Settings(database_url=str(url))  # a URL the service accepts
    assert services["keystore"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["keystore"]["build"] == "."
    assert services["keystore"]["ports"] == ["127.0.0.1:8080:8080"]  # the image's port
    assert "stop_grace_period" in services["keystore"]  # more than gunicorn's 20 s


def test_n8n_installs_the_node_from_the_release_tarball():
    build = COMPOSE["services"]["n8n"]["build"]
    containerfile = (ROOT / build["context"] / build["dockerfile"]).read_text()
    copied = next(line.split()[1] for line in containerfile.splitlines()
                  if line.startswith("COPY "))
    package = json.loads((ROOT / "nodes/n8n/package.json").read_text())
    tarball = f"dist/{package['name']}-{package['version']}.tgz"  # what npm pack writes
    assert fnmatch.fnmatch(tarball, copied)
    # the build context lets that tarball through, and nothing else of dist/
    ignore = (ROOT / ".containerignore").read_text().splitlines()
    assert f"!{copied}" in ignore
    assert "n8nio/n8n:2.8.4" in containerfile  # the n8n version the e2e tests run


def test_the_docs_compose_commands_are_the_ones_run_here():
    section = DOC.split("\n## Compose\n", 1)[1].split("\n## ", 1)[0]
    lines = [line.split("#", 1)[0].split() for line in section.splitlines()
             if line.startswith("    ")]
    shown = [tuple(words[2:]) for words in lines if words[:2] == ["docker", "compose"]]
    assert shown == [UP, LOGS, CLIENT_TOKEN, DOWN]
    assert "podman-compose up -d" in section


needs_image = pytest.mark.skipif(not IMAGE, reason="scripts/test-deploy builds the image and "
                                                   "runs these (KEYSTORE_TEST_IMAGE)")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """compose.yaml up (`podman-compose up -d`), ready, with the docs' two tokens; down -v at
    the end, whatever happened."""
    assert PODMAN_COMPOSE, "podman-compose is missing: pip install -e '.[test]'"
    missing = [i for i in STANDINS if podman("image", "exists", i, check=False).returncode]
    assert not missing, f"{missing}: scripts/ensure-standin-images builds them"
    up = Stack.new(tmp_path_factory.mktemp("compose"))
    try:
        t0 = time.monotonic()
        up.compose(*UP)
        figure("compose_up_s", round(time.monotonic() - t0, 1))  # incl. building n8n's image
        up.wait_ready()
        figure("compose_ready_s", round(time.monotonic() - t0, 1))
        operator = LOG_TOKEN.findall(up.logs(*LOGS[1:]))
        assert len(operator) == 1, up.logs()[-3000:]  # printed once, on the first start
        created = up.compose(*CLIENT_TOKEN).stdout
        client = re.findall(r"(?m)^(ks_[A-Za-z0-9_-]{20,})\r?$", created)  # a tty: \r\n
        assert len(client) == 1, created
        yield up, operator[0], client[0]
    finally:
        t0 = time.monotonic()
        left = up.down()
        figure("compose_down_s", round(time.monotonic() - t0, 1))
        assert left == [], f"left behind: {left}"


@needs_image
def test_compose_up_serves_claims_from_its_postgres(stack):
    up, operator, client = stack
    claim_complete_replay(up.keystore_url, client, "evt-compose")
    # the record is in the compose PostgreSQL (the key store reached it by its service name)
    row = up.compose("exec", "-T", "postgres", "psql", "-U", "keystore", "-d", "keystore",
                     "-tAc", "SELECT state FROM records WHERE key = 'evt-compose'").stdout
    assert row.split() == ["succeeded"]
    assert requests.get(up.keystore_url + "/readyz", timeout=5).json() == {"status": "ready"}


@needs_image
def test_n8n_tests_the_node_credential_against_the_key_store_by_name(stack):
    """What docs/deployment.md tells the reader to do in n8n: the key store credential (the
    community node's, so n8n loaded the node) with base URL http://keystore:8080 and the
    client token; n8n's credential test calls the key store from n8n's container."""
    up, _, client = stack
    rest = requests.Session()
    rest.headers["browser-id"] = "keystore-ci"  # n8n binds its session cookie to one
    owner = {"email": "owner@example.com", "firstName": "CI", "lastName": "Owner",
             "password": "Keystore-ci-1"}
    assert rest.post(up.n8n_url + "/rest/owner/setup", json=owner, timeout=60).ok
    data = {"url": "http://keystore:8080", "token": client}
    made = rest.post(up.n8n_url + "/rest/credentials", timeout=60, json={
        "name": "Idempotency Key Store", "type": "idempotencyKeyStoreApi", "data": data})
    assert made.ok, made.text
    credential = {key: made.json()["data"][key] for key in ("id", "name", "type")}
    tested = rest.post(up.n8n_url + "/rest/credentials/test", timeout=60,
                       json={"credentials": {**credential, "data": data}}).json()["data"]
    assert tested == {"status": "OK",
                      "message": 'Connected: tenant "default", client token "n8n".'}
