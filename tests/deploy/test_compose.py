"""compose.yaml agrees with what it starts: no registry is reachable here, so the compose
file cannot be brought up in CI (its postgres and n8n images cannot be pulled); these
checks keep it consistent with the image's interface, the release's tarball and itself."""
from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import yaml
from sqlalchemy.engine import make_url

from keystore_service.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())


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
