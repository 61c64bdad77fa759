"""docs/webhooks/README.md, "Filtering what a destination gets", runs as written against a
real `keystore serve` (its relay on) and a real receiver: the block's source takes only live
invoices, so of its three events only evt_1 reaches the receiver and the other two are listed
`filtered`. Only the receiver's address (127.0.0.1:9999 on the page) and /tmp are changed."""
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
    section = PAGE.read_text().split("### Filtering what a destination gets", 1)[1]
    return re.search(r"```sh\n(.*?)```", section, flags=re.S).group(1)


@pytest.mark.skipif(not shutil.which("curl"), reason="the page's commands use curl")
def test_the_filtering_block_runs_as_written(tmp_path):
    url = f"sqlite:///{tmp_path}/keystore.db"
    migrate.upgrade(url)
    token = new_token(url, "acme", "operator", "ana")
    sink = Sink(lambda n, r: 204)
    server = Server(url, workers=1, threads=4, env={"KEYSTORE_SECRET_KEY": KEY},
                    log_path=tmp_path / "server.log")
    server.start()
    try:
        script = block().replace("http://127.0.0.1:9999/", sink.url).replace(
            "/tmp/billing.json", f"{tmp_path}/billing.json")
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True,
                              text=True, timeout=60, env={"PATH": "/usr/bin:/bin",
                                                          "KS": server.url, "TOKEN": token})
        assert done.returncode == 0, done.stderr[-2000:]
        assert '"filter":{"event_types":["invoice.*"],"match":[{"pointer":"/data/livemode",' \
               '"equals":true}]}' in done.stdout  # the source, as created
        deadline = time.monotonic() + 20
        while not sink.requests and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)  # the other two have had their turn too
        assert [json.loads(r["body"])["id"] for r in sink.requests] == ["evt_1"]
        listed = subprocess.run(
            ["curl", "-s", f"{server.url}/v1/deliveries?source=billing",
             "-H", f"Authorization: Bearer {token}"], capture_output=True, text=True, timeout=20)
        states = {d["event_id"]: d["state"] for d in json.loads(listed.stdout)["deliveries"]}
        assert states == {"evt_1": "delivered", "evt_2": "filtered", "evt_3": "filtered"}
        assert '"filter":{"event_types":["invoice.*","customer.*"]}' in done.stdout  # PATCH
    finally:
        server.kill()
        sink.close()
