"""docs/webhooks/README.md, "Ordering per key", runs as written against a real `keystore
serve` (its relay on) and a real receiver: of the block's three versions of in_1, evt_2 and
evt_3 reach the receiver and evt_1 (older than evt_2, delivered before it) is listed
`superseded`, its record naming evt_2. Only the receiver's address (127.0.0.1:9999 on the
page) and /tmp are changed."""
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
    section = PAGE.read_text().split("### Ordering per key", 1)[1]
    return re.search(r"```sh\n(.*?)```", section, flags=re.S).group(1)


@pytest.mark.skipif(not shutil.which("curl"), reason="the page's commands use curl")
def test_the_ordering_block_runs_as_written(tmp_path):
    url = f"sqlite:///{tmp_path}/keystore.db"
    migrate.upgrade(url)
    token = new_token(url, "acme", "operator", "ana")
    sink = Sink(lambda n, r: 204)
    server = Server(url, workers=1, threads=4, env={"KEYSTORE_SECRET_KEY": KEY},
                    log_path=tmp_path / "server.log")
    server.start()
    try:
        script = block().replace("http://127.0.0.1:9999/", sink.url).replace(
            "/tmp/crm.json", f"{tmp_path}/crm.json")
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True,
                              text=True, timeout=60, env={"PATH": "/usr/bin:/bin",
                                                          "KS": server.url, "TOKEN": token})
        assert done.returncode == 0, done.stderr[-2000:]
        assert '"ordering":{"key":"/data/object/id","mode":"newer_wins","version":"/created"}' \
            in done.stdout  # the source, as created
        deadline = time.monotonic() + 20
        while len(sink.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [json.loads(r["body"])["id"] for r in sink.requests] == ["evt_2", "evt_3"]
        assert '"event_id":"evt_1"' in done.stdout and '"state":"superseded"' in done.stdout
        assert '"result":{"by":"evt_2","superseded":true}' in done.stdout
    finally:
        server.kill()
        sink.close()
