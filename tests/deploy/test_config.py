"""`keystore config`: every setting with its source, secrets masked, exit 1 on an invalid
value (all of them reported, none echoed raw into the terminal)."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from keystore_service.settings import Settings
from tests.support import KEYSTORE


def config(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KEYSTORE_")}
    return subprocess.run([KEYSTORE, "config", *args], env={**clean, **env},
                          capture_output=True, text=True, timeout=60)


def test_every_setting_with_its_source():
    out = config("--json", KEYSTORE_POOL_SIZE="3", KEYSTORE_ACCESS_LOG="true")
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout)
    assert shown["valid"] is True
    assert set(shown["settings"]) == {f"KEYSTORE_{f.upper()}" for f in Settings.model_fields}
    assert shown["settings"]["KEYSTORE_POOL_SIZE"] == {"value": "3", "source": "environment"}
    assert shown["settings"]["KEYSTORE_ACCESS_LOG"] == {"value": "true",
                                                        "source": "environment"}
    assert shown["settings"]["KEYSTORE_DEFAULT_LEASE_SECONDS"] == {"value": "300",
                                                                   "source": "default"}
    table = config(KEYSTORE_POOL_SIZE="3").stdout
    assert any(line.split()[:2] == ["KEYSTORE_POOL_SIZE", "3"] and "(environment)" in line
               for line in table.splitlines())


@pytest.mark.parametrize("url", [
    "postgresql://keystore:s3cr%40t-pw@db.internal:5432/keystore",
    "postgresql://keystore@db.internal/keystore?password=s3cr%40t-pw&sslmode=require",
])
def test_the_database_password_is_masked(url):
    for args in ((), ("--json",)):
        out = config(*args, KEYSTORE_DATABASE_URL=url)
        assert out.returncode == 0
        assert "s3cr" not in out.stdout + out.stderr
        assert "db.internal" in out.stdout


@pytest.mark.parametrize("name, value", [
    ("KEYSTORE_POOL_SIZE", "0"), ("KEYSTORE_POOL_SIZE", "٢"), ("KEYSTORE_POOL_SIZE", "²"),
    ("KEYSTORE_DEFAULT_TTL_SECONDS", str(2**63)), ("KEYSTORE_LOG_LEVEL", "LOUD\r\nFAKE=1"),
    ("KEYSTORE_DATABASE_URL", "mysql://root:hunter2@db/x"),
    ("KEYSTORE_FORWARDED_ALLOW_IPS", "10.0.0.0/8,not-an-ip"),
    ("KEYSTORE_UI_COOKIE_SECURE", "maybe"),
])
def test_an_invalid_value_exits_1_and_names_it(name, value):
    out = config(KEYSTORE_PORT_UNUSED="1", **{name: value, "KEYSTORE_ACCESS_LOG": "yes-no"})
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    flagged = [ln.split()[0] for ln in lines if "INVALID" in ln]
    assert flagged == sorted(flagged, key=[f"KEYSTORE_{f.upper()}" for f in
                                           Settings.model_fields].index)
    assert name in flagged and "KEYSTORE_ACCESS_LOG" in flagged  # every invalid one
    assert len(lines) == len(Settings.model_fields)  # a CR/LF in a value adds no line
    assert "hunter2" not in out.stdout and "\r" not in out.stdout
    assert "Traceback" not in out.stderr
