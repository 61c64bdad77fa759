"""docs/webhooks/README.md, "Several destinations", runs as written against a real `keystore
serve` (its relay on) and two real receivers: of the block's three events, the invoice
reaches the first receiver only, the customer event the second only, and the refund is
filtered by both; the listing by destination shows crm's two deliveries."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import time

import pytest

from .doc_blocks import PAGE, run_block
from .support import KEY, Sink

REPO = PAGE.parents[2]


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

        # "An operator's pause": its block naming a destination, on the same source
        section = PAGE.read_text().split("### An operator's pause", 1)[1].split("\n### ", 1)[0]
        named, = [b for b in re.findall(r"```sh\n(.*?)```", section, flags=re.S)
                  if '"destination": "crm"' in b]
        # the page's tenant is the quick start's, `default`; this server's token is acme's
        named = named.replace("keystore source pause stripe", "keystore source pause "
                              "stripe --tenant acme")
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", named], cwd=REPO,
                              capture_output=True, text=True, timeout=60, env={
                                  "PATH": "/usr/bin:/bin", "KS": ran.server.url,
                                  "TOKEN": ran.token, "KEYSTORE_SECRET_KEY": KEY,
                                  "KEYSTORE_DATABASE_URL": ran.server.database_url})
        assert done.returncode == 0, done.stderr[-2000:]
        shown = subprocess.run(["curl", "-s", f"{ran.server.url}/v1/sources/stripe",
                                "-H", f"Authorization: Bearer {ran.token}"],
                               capture_output=True, text=True, timeout=20)
        paused = {d["name"]: d["paused"] for d in json.loads(shown.stdout)["source"][
            "destinations"]}
        assert paused == {"billing": None, "crm": {"by": "operator", "until": None,
                                                   "reason": "CRM maintenance"}}
