"""The container image (Containerfile), run under podman: its interface, a claim, complete
and replay on a SQLite volume that outlives a restart, and the same on PostgreSQL.

scripts/test-deploy builds the image and runs these with KEYSTORE_TEST_IMAGE set; without
it they are skipped (building the image takes minutes)."""
from __future__ import annotations

import json
import re
import time

import pytest

from tests.support import KEYSTORE, free_port

from .podman import IMAGE, Container, figure, podman, unique
from .support import claim_complete_replay, replay

pytestmark = pytest.mark.skipif(not IMAGE, reason="scripts/test-deploy builds the image "
                                                  "and runs these (KEYSTORE_TEST_IMAGE)")
TOKEN = re.compile(r"^\s+(ks_[A-Za-z0-9_-]+)\s*$", re.M)


def test_the_image_interface():
    image = json.loads(podman("image", "inspect", IMAGE).stdout)[0]
    config = image["Config"]
    assert config["Entrypoint"] == ["keystore"]
    assert config["Cmd"] == ["serve", "--host", "0.0.0.0", "--port", "8080"]
    assert "KEYSTORE_DATABASE_URL=sqlite:////data/keystore.db" in config["Env"]
    assert "/data" in config["Volumes"]
    assert config["User"] not in ("", "root", "0")
    assert config["StopSignal"] == "SIGTERM"
    assert "/healthz" in " ".join(image["Healthcheck"]["Test"])  # podman shows it here
    # the final stage: no compilers, no pip; the user is not root
    tools = podman("run", "--rm", "--entrypoint", "sh", IMAGE, "-c",
                   "id -u; command -v gcc cc c++ make pip pip3 || true").stdout.split()
    assert tools[0] != "0" and tools[1:] == []


def test_every_keystore_command_runs_in_the_image_as_on_a_host():
    """`IMAGE <command>` is `keystore <command>`: the same commands (relay too, once the
    gateway exists), and `config` reports the image's database default."""
    import subprocess

    def commands(help_text: str) -> list[str]:
        section = help_text.split("Commands:", 1)[1]
        return sorted(line.split()[0] for line in section.splitlines() if line.strip())
    host = subprocess.run([KEYSTORE, "--help"], capture_output=True, text=True).stdout
    assert commands(podman("run", "--rm", IMAGE, "--help").stdout) == commands(host)
    shown = podman("run", "--rm", IMAGE, "config", "--json")
    database = json.loads(shown.stdout)["settings"]["KEYSTORE_DATABASE_URL"]
    assert database == {"value": "sqlite:////data/keystore.db", "source": "environment"}
    bad = podman("run", "--rm", "-e", "KEYSTORE_POOL_SIZE=0", IMAGE, "config", check=False)
    assert bad.returncode == 1 and "KEYSTORE_POOL_SIZE" in bad.stdout


def test_default_command_and_health_check():
    """The default command serves on 0.0.0.0:8080 inside the container's own network, and
    the image's health check (run by podman, inside the container) finds it healthy."""
    box = Container("--network", "none").run()
    try:
        for _ in range(100):
            if podman("healthcheck", "run", box.name, check=False).returncode == 0:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"never healthy:\n{box.logs()[-2000:]}")
        assert box.stop() < 25 and box.exit_code() == 0
        assert "Handling signal: term" in box.logs()
    finally:
        box.remove()


def test_sqlite_on_a_volume_survives_a_restart():
    volume = unique("keystore-data")
    podman("volume", "create", volume)
    port = free_port()
    box = Container("--network", "host", "-v", f"{volume}:/data",
                    command=("serve", "--host", "127.0.0.1", "--port", str(port),
                             "--workers", "2")).run()
    base = f"http://127.0.0.1:{port}"
    try:
        figure("container_start_s", round(box.wait_ready(base), 2))
        tokens = TOKEN.findall(box.logs())
        assert len(tokens) == 1, box.logs()[-2000:]  # the first-start token, printed once
        claim_complete_replay(base, tokens[0], "evt-sqlite")

        stop_s = box.stop()
        figure("container_stop_s", round(stop_s, 2))
        assert box.exit_code() == 0 and stop_s < 25  # SIGTERM: a graceful, clean exit
        box.start()
        figure("container_restart_s", round(box.wait_ready(base), 2))
        replay(base, tokens[0], "evt-sqlite")
        assert TOKEN.findall(box.logs()) == tokens  # not printed again after the restart
        files = podman("run", "--rm", "-v", f"{volume}:/data", "--entrypoint", "ls", IMAGE,
                       "/data").stdout.split()
        assert "keystore.db" in files
    finally:
        box.remove()
        podman("volume", "rm", "-f", volume, check=False)


@pytest.mark.postgres
def test_postgresql_by_url(pg_admin):
    from sqlalchemy.engine import make_url

    from tests.conftest import PG_ADMIN_URL
    name = unique("keystore_container").replace("-", "_")
    pg_admin.execute(f'CREATE DATABASE "{name}"')
    url = make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    port = free_port()
    box = Container("--network", "host", "-e", f"KEYSTORE_DATABASE_URL={url}",
                    command=("serve", "--host", "127.0.0.1", "--port", str(port),
                             "--workers", "2")).run()
    base = f"http://127.0.0.1:{port}"
    try:
        box.wait_ready(base)
        token = TOKEN.findall(box.logs())[0]
        claim_complete_replay(base, token, "evt-pg")
        current = podman("run", "--rm", "--network", "host", "-e",
                         f"KEYSTORE_DATABASE_URL={url}", IMAGE, "db", "current")
        assert current.stdout.splitlines()[0] == current.stdout.splitlines()[1].replace(
            "code:    ", "database:")
        assert box.stop() < 25 and box.exit_code() == 0
    finally:
        box.remove()
        pg_admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
