"""The alert recipes of docs/platforms (n8n-node.md, node-red.md, zapier-app.md) run as
written: each page's JavaScript is run in Node inside what its platform gives it (n8n's Code
node: `$input`, `$env`, `this.helpers`; Node-RED's function: `msg`, `env`, the `crypto`
module from its Setup tab; Code by Zapier: `inputData`), against a webhook channel's notice
made by the key store's own code (gateway/notices.webhook: the body and its Standard
Webhooks headers), the same with one byte changed, with a stale timestamp and with another
secret."""
from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from keystore_service.gateway import notices

REPO = Path(__file__).resolve().parents[2]
SECRET = "whsec_" + base64.b64encode(b"alert-recipe-secret-of-32-bytes!").decode()
ISSUE = {"id": "17", "kind": "delivery_failing", "subject": "stripe-invoices", "state": "open",
         "opened_at": "2026-12-02T01:00:00Z", "last_seen_at": "2026-12-02T01:00:00Z",
         "count": 1, "resolved_at": None, "acknowledged_by": None,
         "url": "https://keystore.example.com/ui/issues#issue-17"}

# What each platform wraps its code in; SNIPPET is the page's block, as written.
HARNESS = {
    "n8n-node.md": """
const $env = { KEYSTORE_ALERT_SECRET: given.secret };
const $input = { first: () => ({ json: { headers: given.headers } }) };
const context = { helpers: { getBinaryDataBuffer: async (item, name) =>
  (item === 0 && name === 'data' ? raw : null) } };
(async function () { SNIPPET }).call(context)
  .then((items) => done({ passed: items[0].json }), (e) => done({ refused: e.message }));
""",
    "node-red.md": """
const crypto = require('crypto');  // the function node's Setup tab
const env = { get: (name) => (name === 'KEYSTORE_ALERT_SECRET' ? given.secret : undefined) };
const msg = { payload: raw, req: { headers: given.headers } };
const [ok, refused] = (function () { SNIPPET })();
done(ok ? { passed: ok.notice, status: ok.statusCode || 200 }
        : { refused: refused.statusCode });
""",
    "zapier-app.md": """
const inputData = { raw_body: raw.toString('utf8'), secret: given.secret,
  webhook_id: given.headers['webhook-id'], webhook_timestamp: given.headers['webhook-timestamp'],
  webhook_signature: given.headers['webhook-signature'] };
(async function () { SNIPPET })()
  .then((output) => done({ passed: output }), (e) => done({ refused: e.message }));
""",
}
PRELUDE = """
const given = JSON.parse(require('fs').readFileSync(process.argv[2], 'utf8'));
const raw = Buffer.from(given.body, 'base64');
const done = (what) => console.log(JSON.stringify(what));
"""


def snippet(page: str) -> str:
    text = (REPO / "docs" / "platforms" / page).read_text()
    section = text.split("alerts", 1)[1]
    [block] = [b for b in re.findall(r"```js\n(.*?)```", section, flags=re.S)
               if "verifyNotice" in b]
    return block


def run(page: str, tmp_path: Path, body: bytes, headers: dict, secret: str = SECRET) -> dict:
    script = tmp_path / f"{page}.js"
    script.write_text(PRELUDE + HARNESS[page].replace("SNIPPET", snippet(page)))
    given = tmp_path / "given.json"
    given.write_text(json.dumps({"body": base64.b64encode(body).decode(), "headers": headers,
                                 "secret": secret}))
    done = subprocess.run(["node", str(script), str(given)], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(shutil.which("node") is None, reason="the recipes are JavaScript")
@pytest.mark.parametrize("page", sorted(HARNESS))
def test_the_alert_recipe_takes_a_signed_notice_and_refuses_the_rest(page, tmp_path):
    now = int(time.time())
    body, headers = notices.webhook("opened", ISSUE, "issue-17-opened", SECRET, now)
    got = run(page, tmp_path, body, headers)
    assert "passed" in got, got
    passed = got["passed"]
    if page == "zapier-app.md":
        assert passed["type"] == "issue.opened" and passed["kind"] == "delivery_failing"
        assert passed["notice_id"] == "issue-17-opened"
    else:
        assert passed["type"] == "issue.opened" and passed["issue"] == ISSUE
    test_body, test_headers = notices.webhook("test", {"channel": "n8n"}, "test-1", SECRET, now)
    assert run(page, tmp_path, test_body, test_headers).get("passed", {})["type"] == "test"

    tampered = body.replace(b"delivery_failing", b"delivery_failinG")
    stale_body, stale = notices.webhook("opened", ISSUE, "issue-17-opened", SECRET, now - 301)
    other = "whsec_" + base64.b64encode(b"o" * 32).decode()
    for case in (run(page, tmp_path, tampered, headers),
                 run(page, tmp_path, stale_body, stale),
                 run(page, tmp_path, body, headers, secret=other),
                 run(page, tmp_path, body, {**headers, "webhook-signature": "v1,"}),
                 run(page, tmp_path, body, {})):
        assert "refused" in case, case
        if page == "node-red.md":
            assert case["refused"] == 401
