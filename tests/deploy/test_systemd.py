"""The systemd unit (deploy/systemd/keystore.service): `systemd-analyze verify` accepts it,
its hardening scores as "OK" or better offline, and its ExecStart with its Environment
lines really starts the service (systemd itself does not run on these machines)."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import requests

from tests.support import KEYSTORE, free_port

UNIT = Path(__file__).resolve().parents[2] / "deploy" / "systemd" / "keystore.service"
INSTALLED = "/opt/keystore/bin/keystore"
ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(not ANALYZE, reason="systemd-analyze is missing "
                                   "(scripts/test-deploy installs Debian's systemd)")


def local_unit(tmp_path: Path) -> Path:
    """The unit with ExecStart pointing at this checkout's keystore (verify checks that the
    program exists)."""
    text = UNIT.read_text()
    assert text.count(INSTALLED) == 1
    path = tmp_path / "keystore.service"
    path.write_text(text.replace(INSTALLED, KEYSTORE))
    return path


@needs_analyze
def test_systemd_analyze_verify_accepts_the_unit(tmp_path):
    out = subprocess.run([ANALYZE, "verify", str(local_unit(tmp_path))], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and out.stderr.strip() == "", out.stderr


@needs_analyze
def test_the_hardening_scores_ok(tmp_path):
    out = subprocess.run([ANALYZE, "security", "--offline=true", "--no-pager",
                          str(local_unit(tmp_path))], capture_output=True, text=True,
                         timeout=120)
    score = float(re.search(r"Overall exposure level for \S+: ([\d.]+)", out.stdout).group(1))
    assert score <= 2.0, out.stdout[-3000:]  # systemd calls up to 3.9 "OK"


def test_the_unit_runs_the_service_as_written(tmp_path):
    """ExecStart and the Environment lines, as systemd would run them (the port changed)."""
    unit = UNIT.read_text()
    env = dict(line.split("=", 2)[1:] for line in unit.splitlines()
               if line.startswith("Environment="))
    assert env == {"KEYSTORE_DATABASE_URL": "sqlite:////var/lib/keystore/keystore.db"}
    assert "StateDirectory=keystore" in unit  # /var/lib/keystore
    argv = re.search(r"^ExecStart=(.+)$", unit, re.M).group(1).split()
    assert argv[0] == INSTALLED
    port = free_port()
    argv = [KEYSTORE, *argv[1:]]
    argv[argv.index("--port") + 1] = str(port)
    env["KEYSTORE_DATABASE_URL"] = env["KEYSTORE_DATABASE_URL"].replace(
        "/var/lib/keystore", str(tmp_path))
    proc = subprocess.Popen(argv, env={**os.environ, **env}, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        for _ in range(300):
            try:
                if requests.get(f"http://127.0.0.1:{port}/readyz", timeout=1).ok:
                    break
            except requests.RequestException:
                time.sleep(0.1)
        else:
            pytest.fail("the unit's command did not start the service")
        assert (tmp_path / "keystore.db").exists()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # KillSignal=SIGTERM
        assert proc.wait(30) == 0
