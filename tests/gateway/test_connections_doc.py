"""docs/api.md's "Connections" and "Scope settlement" run as written (both backends): their
shell blocks, in order, in one bash, against a `keystore serve` of the test's database, with
$KS its address and $TOKEN an operator token of tenant acme, and `keystore` on PATH. Every
curl must succeed (each is run with -f), and what the blocks made is then what the API shows;
the header value they seal is in no output."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.support.server import Server
from tests.support.tokens import new_token

from .support import KEY

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "api.md"
SECTIONS = ("## Connections (operator)", "## Scope settlement (operator)")
SECRET = "sk_test_4eC39HqLyjWDarjtT1zdp7dc"  # the page's


def blocks() -> list[str]:
    text = PAGE.read_text()
    start = text.index(SECTIONS[0])
    end = text.index("\n## ", text.index(SECTIONS[1]) + 3)
    return re.findall(r"```sh\n(.*?)```", text[start:end], flags=re.S)


def test_the_pages_blocks_are_there():
    found = blocks()
    assert len(found) == 3
    assert all("$KS" in b or "keystore " in b for b in found)


@pytest.mark.skipif(shutil.which("curl") is None, reason="the page's commands use curl")
def test_the_connection_and_settlement_blocks_run_as_written(database_url, tmp_path):
    token = new_token(database_url, "acme", "operator")
    server = Server(database_url, workers=1, threads=4,
                    env={"KEYSTORE_SECRET_KEY": KEY, "KEYSTORE_RELAY_IN_SERVE": "false"},
                    log_path=tmp_path / "server.log").start()
    try:
        env = {**os.environ, "KS": server.url, "TOKEN": token,
               "KEYSTORE_DATABASE_URL": database_url, "KEYSTORE_SECRET_KEY": KEY,
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        script = ["set -euo pipefail", 'curl() { command curl -f "$@"; echo; }',
                  *blocks()]
        done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
        def get(path: str) -> tuple[int, dict]:
            r = requests.get(server.url + path, headers={"Authorization": f"Bearer {token}"},
                             timeout=10)
            return r.status_code, r.json()
        invoices = get("/v1/connections/invoices")[1]["connection"]
        assert invoices["headers"] == ["Authorization"]
        assert (invoices["timeout_seconds"], invoices["rate"]) == (5, None)
        assert invoices["check"]["path"] == "/invoices?reference={reference}"
        ledger = get("/v1/connections/ledger")[1]["connection"]
        assert (ledger["max_in_flight"], ledger["rate"], ledger["idempotency_header"]) == \
            (2, {"per_minute": 600}, "Idempotency-Key")
        assert get("/v1/scopes/invoice-sync/settlement")[0] == 404  # the last DELETE
        settled = get("/v1/scopes/ledger-sync/settlement")[1]["settlement"]
        assert (settled["connection"], settled["on_absent"]) == ("ledger", "review")
        assert SECRET not in done.stdout + done.stderr + (tmp_path / "server.log").read_text()
    finally:
        server.stop()

