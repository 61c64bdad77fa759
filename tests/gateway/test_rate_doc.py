"""docs/webhooks/README.md, "Feeding a destination at a rate", runs as written against a
real `keystore serve` (its relay on) and a real receiver: the block's source is fed at 1/s,
so its five events arrive in order about a second apart, and its PATCH to 30/min is answered
with the new rate. Only the receiver's address (127.0.0.1:9999 on the page) and /tmp are
changed."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from keystore_service.storage import migrate
from tests.support import Server, new_token

from .support import KEY, Sink

PAGE = Path(__file__).resolve().parents[2] / "docs" / "webhooks" / "README.md"


def block() -> str:
    section = PAGE.read_text().split("### Feeding a destination at a rate", 1)[1]
    return re.search(r"```sh\n(.*?)```", section, flags=re.S).group(1)


@pytest.mark.skipif(not shutil.which("curl"), reason="the page's commands use curl")
def test_the_rate_block_runs_as_written(tmp_path):
    url = f"sqlite:///{tmp_path}/keystore.db"
    migrate.upgrade(url)
    token = new_token(url, "acme", "operator", "ana")
    sink = Sink(lambda n, r: (r.__setitem__("at", time.monotonic()), 204)[1])
    server = Server(url, workers=1, threads=4, env={"KEYSTORE_SECRET_KEY": KEY},
                    log_path=tmp_path / "server.log")
    server.start()
    try:
        script = block().replace("http://127.0.0.1:9999/", sink.url).replace(
            "/tmp/zapier.json", f"{tmp_path}/zapier.json")
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True,
                              text=True, timeout=60, env={"PATH": "/usr/bin:/bin",
                                                          "KS": server.url, "TOKEN": token})
        assert done.returncode == 0, done.stderr[-2000:]
        assert '"rate":{"per_second":1}' in done.stdout  # the source, as created
        got = [(r["at"], json.loads(r["body"])["id"]) for r in sink.requests]
        assert [e for _, e in got] == [f"evt_{i}" for i in range(1, 6)]
        gaps = [b - a for (a, _), (b, _) in zip(got, got[1:])]
        assert all(g >= 0.9 for g in gaps) and got[-1][0] - got[0][0] < 5.5, gaps
        assert done.stdout.count('"state":"delivered"') == 5  # the listing after the sleep
        assert '"rate":{"per_minute":30}' in done.stdout  # the PATCH's answer
    finally:
        server.kill()
        sink.close()
