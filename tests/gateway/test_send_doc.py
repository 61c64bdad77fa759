"""docs/api.md's "Send once" runs as written (both backends): its shell block in one bash
against a `keystore serve` (with its relay) of the test's database, $KS its address, $TOKEN
an operator token of tenant acme and $API the scripted downstream API on 127.0.0.1 (deduping
on Idempotency-Key). Every curl must succeed (-f): the first answers 201 sent with the
invoice's id, the repeat 200 replay, and the API got one request carrying the sealed header,
whose value is in no output and no log line."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.downstream import Downstream
from tests.support.server import Server
from tests.support.tokens import new_token

from .support import KEY

PAGE = Path(__file__).resolve().parents[2] / "docs" / "api.md"
SECRET = "sk_test_51HqLyjWDarjtT1zdp7dc"  # the page's


def block() -> str:
    text = PAGE.read_text()
    start = text.index("## Send once")
    found = re.findall(r"```sh\n(.*?)```", text[start:text.index("\n## ", start + 3)],
                       flags=re.S)
    assert len(found) == 1
    return found[0]


@pytest.mark.skipif(shutil.which("curl") is None, reason="the page's commands use curl")
def test_the_send_block_runs_as_written(database_url, tmp_path):
    token = new_token(database_url, "acme", "operator")
    server = Server(database_url, workers=1, threads=4, env={"KEYSTORE_SECRET_KEY": KEY},
                    log_path=tmp_path / "server.log").start()
    api = Downstream(dedupe_header="Idempotency-Key").start()
    try:
        env = {**os.environ, "KS": server.url, "TOKEN": token, "API": api.url}
        script = ["set -euo pipefail", 'curl() { command curl -f "$@"; echo; }', block()]
        done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
        answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        assert [a.get("outcome") for a in answers[1:]] == ["sent", "replay"], answers
        assert answers[1]["result"]["resource_id"] == "in_1"
        assert answers[2]["result"] == answers[1]["result"]
        assert api.requests() == 1 and api.created() == 1
        [seen] = api.requests_seen()
        assert seen.headers["authorization"] == f"Bearer {SECRET}"
        assert seen.headers["idempotency-key"] == "invoices:order-1001"
        assert SECRET not in done.stdout + done.stderr + (tmp_path / "server.log").read_text()
    finally:
        api.close()
        server.stop()
