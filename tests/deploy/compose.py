"""compose.yaml brought up from tests with podman-compose, as docs/deployment.md says, and
taken down again with everything it made."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from tests.support import free_port

from .podman import ENV, IMAGE, REPO, podman, unique

# scripts/test-deploy installs it into .venv with the `test` extra; a PATH one does as well.
_IN_VENV = Path(sys.executable).parent / "podman-compose"
PODMAN_COMPOSE = str(_IN_VENV) if _IN_VENV.exists() else shutil.which("podman-compose") or ""
# The registry images compose.yaml starts: no registry is reachable on the CI machines, so
# scripts/ensure-standin-images builds stand-ins under these names (tests/deploy/standins/).
STANDINS = ("docker.io/library/postgres:16-bookworm", "docker.io/n8nio/n8n:2.8.4")
# Beside compose.yaml, never instead of it: free host ports (8080 and 5678 may be taken on
# a shared machine), the release's image for the key store (compose builds the same
# Containerfile; this tests the image CI built and measured), and no telemetry from n8n.
# `!override` replaces the list rather than adding to it (docker compose reads it too).
OVERRIDE = """\
services:
  keystore:
    image: {image}
    ports: !override
      - "127.0.0.1:{keystore_port}:8080"
  n8n:
    ports: !override
      - "127.0.0.1:{n8n_port}:5678"
    environment:
      N8N_DIAGNOSTICS_ENABLED: "false"
      N8N_VERSION_NOTIFICATIONS_ENABLED: "false"
"""
# docs/deployment.md's "Compose" commands, run as written there after `podman-compose -p
# PROJECT -f compose.yaml -f OVERRIDE` (test_compose.py checks the docs show these).
UP = ("up", "-d")
LOGS = ("logs", "keystore")
CLIENT_TOKEN = ("exec", "keystore", "keystore", "token", "create", "--tenant", "default",
                "--role", "client", "--name", "n8n")
DOWN = ("down", "-v")
# Builds (compose builds deploy/n8n/Containerfile) need chroot isolation on these machines.
BUILD_ARGS = "--isolation chroot"
LOG_TOKEN = re.compile(r"(?m)^.*\s(ks_[A-Za-z0-9_-]{20,})\s*$")  # `[keystore] |     ks_...`
COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # `logs` colours its lines even with --no-ansi


@dataclass
class Stack:
    project: str
    override: Path
    keystore_url: str
    n8n_url: str

    @classmethod
    def new(cls, folder: Path) -> Stack:
        ports = {"keystore_port": free_port(), "n8n_port": free_port()}
        override = folder / "compose.ci.yaml"
        override.write_text(OVERRIDE.format(image=IMAGE, **ports))
        return cls(unique("keystore-compose"), override,
                   f"http://127.0.0.1:{ports['keystore_port']}",
                   f"http://127.0.0.1:{ports['n8n_port']}")

    def compose(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
        """`podman-compose ARGS` on compose.yaml (and the override), in the repository."""
        done = subprocess.run(
            [PODMAN_COMPOSE, "--no-ansi", "-p", self.project, "-f", "compose.yaml",
             "-f", str(self.override), "--podman-build-args", BUILD_ARGS, *args],
            cwd=REPO, env=ENV, capture_output=True, text=True, timeout=timeout,
            stdin=subprocess.DEVNULL)
        assert done.returncode == 0, (args, done.stdout[-3000:], done.stderr[-3000:])
        return done

    def wait_ready(self, timeout: float = 300) -> None:
        """Until the key store's /readyz (its database answers) says 200 through its published
        port, and n8n's readiness does and its log says the editor is up (its REST routes
        answer 404 before that, as nodes/n8n's e2e tests found)."""
        t0 = time.monotonic()
        checks = (lambda: answers(self.keystore_url + "/readyz"),
                  lambda: answers(self.n8n_url + "/healthz/readiness"),
                  lambda: "Editor is now accessible" in self.logs("n8n"))
        for check in checks:
            while not check():
                if time.monotonic() - t0 > timeout:
                    raise AssertionError(f"not ready in {timeout} s:\n"
                                         f"{self.logs('keystore')[-2000:]}\n"
                                         f"{self.logs('n8n')[-2000:]}")
                time.sleep(0.5)

    def logs(self, service: str = "keystore") -> str:
        done = subprocess.run([PODMAN_COMPOSE, "--no-ansi", "-p", self.project, "-f",
                               "compose.yaml", "-f", str(self.override), *LOGS[:1], service],
                              cwd=REPO, env=ENV, capture_output=True, text=True, timeout=60)
        return COLOUR.sub("", done.stdout + done.stderr)

    def down(self) -> list[str]:
        """`down -v`, then what it leaves: the anonymous volume of the key store image's
        VOLUME /data (podman-compose removes named volumes only), the image compose built
        for n8n, and anything a failed `up` left half made. Returns what is still there."""
        label = f"label=io.podman.compose.project={self.project}"
        ids = podman("ps", "-a", "-q", "--filter", label).stdout.split()
        volumes = podman("inspect", "--format",
                         '{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}',
                         *ids, check=False).stdout.split() if ids else []
        try:
            self.compose(*DOWN, timeout=180)
        finally:
            for leftover in podman("ps", "-a", "-q", "--filter", label).stdout.split():
                podman("rm", "-f", "-v", leftover, check=False)
            volumes += podman("volume", "ls", "-q", "--filter", label).stdout.split()
            for volume in volumes:
                podman("volume", "rm", "-f", volume, check=False)
            podman("rmi", "-f", f"localhost/{self.project}_n8n", check=False)
            podman("pod", "rm", "-f", "--ignore", f"pod_{self.project}", check=False)
            podman("network", "rm", "-f", f"{self.project}_default", check=False)
        return [line for line in (
            podman("ps", "-a", "--format", "{{.Names}}").stdout.splitlines()
            + podman("volume", "ls", "--format", "{{.Name}}").stdout.splitlines()
            + podman("network", "ls", "--format", "{{.Name}}").stdout.splitlines()
            + podman("pod", "ls", "--format", "{{.Name}}").stdout.splitlines()
            + podman("images", "--format", "{{.Repository}}").stdout.splitlines())
            if self.project in line or line in volumes]


def answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False
