"""Running the container image under podman from tests (scripts/test-deploy builds it)."""
from __future__ import annotations

import os
import secrets
import subprocess
import time
from pathlib import Path
from typing import Optional

import requests

REPO = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("KEYSTORE_TEST_IMAGE", "")
# runc and no default ulimits: what podman needs on these machines (scripts/podman/).
ENV = {**os.environ,
       "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF",
                                         str(REPO / "scripts/podman/containers.conf"))}


def podman(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], env=ENV, capture_output=True, text=True,
                          check=check, timeout=timeout)


def figure(name: str, value: float) -> None:
    """A measured figure for the closing report: appended to $KEYSTORE_FIGURES if set."""
    path = os.environ.get("KEYSTORE_FIGURES")
    if path:
        with open(path, "a") as f:
            f.write(f"{name} {value}\n")


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{secrets.token_hex(3)}"


class Container:
    """One `podman run -d` of the image, removed (with its anonymous volumes) at the end."""

    def __init__(self, *run_args: str, command: tuple[str, ...] = ()):
        self.name = unique("keystore-test")
        self.run_args, self.command = run_args, command
        self.started_s: Optional[float] = None

    def run(self) -> Container:
        self.started_s = time.monotonic()
        podman("run", "-d", "--name", self.name, "--health-interval=disable", *self.run_args,
               IMAGE, *self.command)
        return self

    def start(self) -> Container:
        self.started_s = time.monotonic()
        podman("start", self.name)
        return self

    def wait_ready(self, url: str, timeout: float = 60) -> float:
        """Seconds from `podman run` (or `start`) until `url`/readyz answered 200."""
        t0 = self.started_s or time.monotonic()
        while time.monotonic() - t0 < timeout:
            state = podman("inspect", "--format", "{{.State.Status}}", self.name).stdout.strip()
            if state == "exited":
                raise AssertionError(f"the container exited:\n{self.logs()[-2000:]}")
            try:
                if requests.get(url + "/readyz", timeout=1).status_code == 200:
                    return time.monotonic() - t0
            except requests.RequestException:
                pass
            time.sleep(0.05)
        raise AssertionError(f"not ready in {timeout} s:\n{self.logs()[-2000:]}")

    def logs(self) -> str:
        out = podman("logs", self.name, check=False)
        return out.stdout + out.stderr

    def stop(self, grace: int = 30) -> float:
        t0 = time.monotonic()
        podman("stop", "-t", str(grace), self.name, timeout=grace + 30)
        return time.monotonic() - t0

    def exit_code(self) -> int:
        return int(podman("inspect", "--format", "{{.State.ExitCode}}", self.name).stdout)

    def remove(self) -> None:
        podman("rm", "-f", "-v", self.name, check=False)
