"""docs/webhooks/README.md, "Feeding a destination at a rate", runs as written against a
real `keystore serve` (its relay on) and a real receiver: the block's source is fed at 1/s,
so its five events arrive in order about a second apart, and its PATCH to 30/min is answered
with the new rate. Only the receiver's address (127.0.0.1:9999 on the page) and /tmp are
changed."""
from __future__ import annotations

import json
import shutil
import time

import pytest

from .doc_blocks import run_block
from .support import Sink


@pytest.mark.skipif(not shutil.which("curl"), reason="the page's commands use curl")
def test_the_rate_block_runs_as_written(tmp_path):
    sink = Sink(lambda n, r: (r.__setitem__("at", time.monotonic()), 204)[1])
    heading = "### Feeding a destination at a rate"
    with run_block(tmp_path, heading, sink, "zapier.json") as ran:
        assert '"rate":{"per_second":1}' in ran.done.stdout  # the source, as created
        got = [(r["at"], json.loads(r["body"])["id"]) for r in sink.requests]
        assert [e for _, e in got] == [f"evt_{i}" for i in range(1, 6)]
        gaps = [b - a for (a, _), (b, _) in zip(got, got[1:])]
        assert all(g >= 0.9 for g in gaps) and got[-1][0] - got[0][0] < 5.5, gaps
        assert ran.done.stdout.count('"state":"delivered"') == 5  # the listing after the sleep
        assert '"rate":{"per_minute":30}' in ran.done.stdout  # the PATCH's answer
