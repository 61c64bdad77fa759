"""docs/webhooks/README.md, "Serial: one at a time per key", runs as written against a real
`keystore serve` (its relay on) and a real receiver that is down (it answers every forward
500, as nothing listening at the page's 127.0.0.1:9999 would refuse it): evt_2 is listed
waiting on evt_1, the first event of its key, and evt_3 (another key) waits on none and is
retried on its own. Only the receiver's address and /tmp are changed."""
from __future__ import annotations

import json
import shutil

import pytest

from .doc_blocks import run_block
from .support import Sink


def answers(stdout: str) -> list[dict]:
    """The JSON answers curl printed one after the other (without newlines between)."""
    decoder, out, at = json.JSONDecoder(), [], 0
    while at < len(stdout):
        if stdout[at].isspace():
            at += 1
            continue
        found, at = decoder.raw_decode(stdout, at)
        out.append(found)
    return out


@pytest.mark.skipif(not shutil.which("curl"), reason="the page's commands use curl")
def test_the_serial_block_runs_as_written(tmp_path):
    sink = Sink(lambda n, r: 500)
    with run_block(tmp_path, "#### Serial: one at a time per key", sink, "orders.json") as ran:
        assert '"ordering":{"key":"/data/object/id","mode":"serial"}' in ran.done.stdout
        listings = [out["deliveries"][0] for out in answers(ran.done.stdout)
                    if "deliveries" in out]
        assert [(d["event_id"], d["state"], d["waiting_on"]) for d in listings] == [
            ("evt_2", "queued", "evt_1"), ("evt_3", "queued", None)]
        sent = {json.loads(r["body"])["id"] for r in sink.requests}
        assert "evt_3" in sent and "evt_2" not in sent  # evt_3 was tried; evt_2 never
