"""docs/webhooks/README.md, "Several destinations", runs as written against a real `keystore
serve` (its relay on) and two real receivers: of the block's three events, the invoice
reaches the first receiver only, the customer event the second only, and the refund is
filtered by both; the listing by destination shows crm's two deliveries."""
from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest

from .doc_blocks import run_block
from .support import Sink


@pytest.mark.skipif(not shutil.which("curl"), reason="the page's commands use curl")
def test_the_several_destinations_block_runs_as_written(tmp_path):
    billing, crm = Sink(lambda n, r: 204), Sink(lambda n, r: 204)
    with run_block(tmp_path, "### Several destinations", billing, "stripe.json",
                   second=crm) as ran:
        made = json.JSONDecoder().raw_decode(ran.done.stdout)[0]["source"]
        assert [d["name"] for d in made["destinations"]] == ["billing", "crm"]
        assert made["destinations"][1]["max_in_flight"] == 2
        deadline = time.monotonic() + 20
        while not (billing.requests and crm.requests) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)  # the refund has had its turn too
        assert [json.loads(r["body"])["id"] for r in billing.requests] == ["evt_1"]
        assert [json.loads(r["body"])["id"] for r in crm.requests] == ["evt_2"]
        listed = subprocess.run(
            ["curl", "-s", f"{ran.server.url}/v1/deliveries?source=stripe",
             "-H", f"Authorization: Bearer {ran.token}"], capture_output=True, text=True,
            timeout=20)
        states = sorted((d["event_id"], d["destination"], d["state"])
                        for d in json.loads(listed.stdout)["deliveries"])
        assert states == [("evt_1", "billing", "delivered"), ("evt_1", "crm", "filtered"),
                          ("evt_2", "billing", "filtered"), ("evt_2", "crm", "delivered"),
                          ("evt_3", "billing", "filtered"), ("evt_3", "crm", "filtered")]
