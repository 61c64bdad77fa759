"""server.py (and gunicorn_conf, which imports it) must set PROMETHEUS_MULTIPROC_DIR before
prometheus_client is first imported, or every worker counts in a registry of its own and
/metrics shows one worker's share (tests/e2e/test_gunicorn.py saw 0 of 200 claims when
web.errors began to import web.context, which imported service.metrics)."""
from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["keystore_service.server", "keystore_service.sealing_keys"])
def test_the_server_imports_no_prometheus_client_before_its_metrics_directory(module):
    code = f"import sys, {module}; print('prometheus_client' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
