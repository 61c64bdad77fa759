"""docs/webhooks/recipes.md runs as written: its shell blocks that need only the key store
(the source, a Stripe-signed delivery, the operator's view, the redeliveries, the Zapier
source, the Node-RED destination, Make's claim and complete, one endpoint routed to two
workflows by type, then to two Zaps and two Make scenarios, the clean-up) run in one bash,
in order, against the `keystore serve` the first block starts. Only the ports and the
database's path are changed, to free ones. The n8n and Node-RED blocks are run by those
packages' own tests (nodes/*/test/*gateway*)."""
from __future__ import annotations

import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from tests.support import free_port

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "webhooks" / "recipes.md"
# the blocks that start n8n, Node-RED or the stand-in invoice API
ELSEWHERE = ("n8n ", "/flows", "http.server")


def runnable_blocks() -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", PAGE.read_text(), flags=re.S)
    return [b for b in blocks if not any(mark in b for mark in ELSEWHERE)]


@pytest.mark.skipif(not all(shutil.which(t) for t in ("curl", "jq", "openssl")),
                    reason="the page's commands use curl, jq and openssl")
def test_the_key_store_blocks_run_as_written(tmp_path):
    ports = {"8090": str(free_port()), "5678": str(free_port()), "1880": str(free_port())}
    script = ["set -euo pipefail"]
    for i, block in enumerate(runnable_blocks()):
        for old, new in ports.items():
            block = block.replace(f"127.0.0.1:{old}", f"127.0.0.1:{new}").replace(
                f"--port {old}", f"--port {new}")
        block = block.replace("/tmp/recipes.db", f"{tmp_path}/recipes.db").replace(
            "/tmp/recipe-", f"{tmp_path}/recipe-")
        script += [f"echo '### {i}'", block]
    done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    parts = re.split(r"^### (\d+)$", done.stdout, flags=re.M)
    out = {number: text.strip() for number, text in zip(parts[1::2], parts[2::2], strict=True)}
    ks = f"http://127.0.0.1:{ports['8090']}"

    # (serve's first start prints the operator token before it)
    assert re.fullmatch(rf"{ks}/hooks/[A-Za-z0-9_-]{{32,}}", out["0"].split()[-1])
    assert out["1"] == '{"status":"accepted","event_id":"evt_recipe_1"} 202'
    # no workflow listens on the destination: queued, retried after "no connection"
    assert out["2"].startswith('{"state":"queued","attempts":[{"at":')
    assert '"error":"no connection"' in out["2"]
    assert out["3"] == out["4"] == ""  # nothing failed, nothing delivered: no redelivery
    assert re.fullmatch(rf"{ks}/hooks/[A-Za-z0-9_-]{{32,}}", out["5"])  # Zapier's
    assert out["6"] == f"http://127.0.0.1:{ports['1880']}/stripe-events"
    assert out["7"].split() == ["acquired", "succeeded", "replay", "INV-1"]
    # one Stripe endpoint, two workflows by type: each event is one delivery per destination,
    # sent only where the filter takes it; a type neither takes is filtered by both
    assert out["8"].splitlines() == [
        "evt_routed_1 invoices queued", "evt_routed_1 payments filtered",
        "evt_routed_2 invoices filtered", "evt_routed_2 payments queued",
        "evt_routed_3 invoices filtered", "evt_routed_3 payments filtered"]
    # the same for Zapier (stripe-zap's one destination kept first, a second Zap beside it)
    # and Make (a source of its own): nothing is sent to either, the list is what they get
    assert out["9"].splitlines() == ["default invoice.* 10/s", "payments payment_intent.* 10/s"]
    assert out["10"].splitlines() == [
        "invoices invoice.* https://hook.eu1.make.com/invoices-webhook-token",
        "payments payment_intent.* https://hook.eu1.make.com/payments-webhook-token"]
    assert "11" in out
    with pytest.raises(ConnectionRefusedError):  # the clean-up stopped the service
        socket.create_connection(("127.0.0.1", int(ports["8090"])), timeout=5).close()


README = REPO / "README.md"


def test_the_recipe_runs_beside_the_quick_start():
    """The README's quick start serves on 8080 (or 8081, its "another port") on ./keystore.db;
    a reader who follows it and then this page must not start a second server on the same
    port (it used to: the recipe's readyz loop answered from the other server, whose tokens
    the recipe had not made, so every call then got 401)."""
    quick = set(re.findall(r"127\.0\.0\.1:(\d+)|--port (\d+)", README.read_text()))
    taken = {p for pair in quick for p in pair if p}
    assert "8080" in taken
    served = set(re.findall(r"keystore serve --port (\d+)", PAGE.read_text()))
    assert served and not served & taken, (served, taken)
    used = set(re.findall(r"127\.0\.0\.1:(\d+)", PAGE.read_text()))
    assert not used & taken, used & taken  # every call goes to the recipe's own server
    assert "sqlite:///keystore.db" not in PAGE.read_text()


def test_no_secret_is_given_on_a_command_line():
    """Signing and destination secrets reach the commands on stdin (`--secret -`,
    `--destination-secret -`, curl's `@-`), never as an argument that `ps` shows."""
    for block in re.findall(r"```sh\n(.*?)```", PAGE.read_text(), flags=re.S):
        for option in re.findall(r"--(?:destination-)?secret (\S+)", block):
            assert option == "-", block
        assert not re.search(r"""-d ["'].*secret""", block), block


def test_the_n8n_recipe_names_n8ns_second_port():
    n8n = PAGE.read_text().split("\n## n8n\n", 1)[1].split("\n## ", 1)[0]
    assert "5679" in n8n and "N8N_RUNNERS_BROKER_PORT" in n8n
