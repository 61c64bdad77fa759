"""docs/webhooks/README.md, "Filtering what a destination gets", runs as written against a
real `keystore serve` (its relay on) and a real receiver: the block's source takes only live
invoices, so of its three events only evt_1 reaches the receiver and the other two are listed
`filtered`. Only the receiver's address (127.0.0.1:9999 on the page) and /tmp are changed."""
from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest

from .doc_blocks import run_block
from .support import Sink


@pytest.mark.skipif(not shutil.which("curl"), reason="the page's commands use curl")
def test_the_filtering_block_runs_as_written(tmp_path):
    sink = Sink(lambda n, r: 204)
    heading = "### Filtering what a destination gets"
    with run_block(tmp_path, heading, sink, "billing.json") as ran:
        assert '"filter":{"event_types":["invoice.*"],"match":[{"pointer":"/data/livemode",' \
               '"equals":true}]}' in ran.done.stdout  # the source, as created
        deadline = time.monotonic() + 20
        while not sink.requests and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)  # the other two have had their turn too
        assert [json.loads(r["body"])["id"] for r in sink.requests] == ["evt_1"]
        listed = subprocess.run(
            ["curl", "-s", f"{ran.server.url}/v1/deliveries?source=billing",
             "-H", f"Authorization: Bearer {ran.token}"], capture_output=True, text=True,
            timeout=20)
        states = {d["event_id"]: d["state"] for d in json.loads(listed.stdout)["deliveries"]}
        assert states == {"evt_1": "delivered", "evt_2": "filtered", "evt_3": "filtered"}
        assert '"filter":{"event_types":["invoice.*","customer.*"]}' in ran.done.stdout  # PATCH
