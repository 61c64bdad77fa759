"""docs/webhooks/README.md, "Ordering per key", runs as written against a real `keystore
serve` (its relay on) and a real receiver: of the block's three versions of in_1, evt_2 and
evt_3 reach the receiver and evt_1 (older than evt_2, delivered before it) is listed
`superseded`, its record naming evt_2. Only the receiver's address (127.0.0.1:9999 on the
page) and /tmp are changed."""
from __future__ import annotations

import json
import shutil
import time

import pytest

from .doc_blocks import run_block
from .support import Sink


@pytest.mark.skipif(not shutil.which("curl"), reason="the page's commands use curl")
def test_the_ordering_block_runs_as_written(tmp_path):
    sink = Sink(lambda n, r: 204)
    heading = "### Ordering per key"
    with run_block(tmp_path, heading, sink, "crm.json") as ran:
        assert '"ordering":{"key":"/data/object/id","mode":"newer_wins","version":"/created"}' \
            in ran.done.stdout  # the source, as created
        deadline = time.monotonic() + 20
        while len(sink.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [json.loads(r["body"])["id"] for r in sink.requests] == ["evt_2", "evt_3"]
        assert '"event_id":"evt_1"' in ran.done.stdout and '"state":"superseded"' in ran.done.stdout
        assert '"result":{"by":"evt_2","superseded":true}' in ran.done.stdout
