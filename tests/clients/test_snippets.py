"""Each paste-ready snippet in clients/snippets/, executed for real against the running
service, called exactly as its platform calls it (see the harnesses in harness/): the side
effect goes to the effect sink. Run twice with the same inputs -> one effect, and the second
run reports the replay; a transient failure releases the key and the platform's retry
succeeds once."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import textwrap
import threading
import time
from datetime import UTC, datetime

import pytest
import requests

from .conftest import HERE, REPO

SNIPPETS = REPO / "clients" / "snippets"
NODE = shutil.which("node") or "/usr/bin/node"


def node(harness: str, snippet: str, stdin: dict) -> dict:
    r = subprocess.run([NODE, str(HERE / "harness" / harness), str(SNIPPETS / snippet)],
                       input=json.dumps(stdin), capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


# --- n8n Code node ----------------------------------------------------------------------

def n8n(service, sink, effect, items, env_blocked=False):
    """The snippet as shipped (scope "create_invoice"); keys are unique per test."""
    env = {"KEYSTORE_URL": service.url, "KEYSTORE_TOKEN": service.token,
           "TARGET_URL": f"{sink.url}/effects/{effect}"}
    source = (SNIPPETS / "n8n-code-node.js").read_text()
    assert "scope: 'create_invoice'" in source
    return node("n8n-code-node.mjs", "n8n-code-node.js",
                {"items": items, "env": None if env_blocked else env})


def test_n8n_snippet_twice_one_effect_then_replay(service, sink, effect, scope):
    items = [{"event_id": f"{scope}-evt-1", "amount": 1250},
             {"event_id": f"{scope}-evt-2", "amount": 99}]
    first = n8n(service, sink, effect, items)
    assert first["ok"], first
    assert [i["json"]["keystore"]["outcome"] for i in first["items"]] == ["acquired"] * 2
    assert first["items"][0]["json"]["keystore"]["result"]["resource_id"] == f"{effect}-1"
    second = n8n(service, sink, effect, items)
    assert second["ok"], second
    replays = [i["json"]["keystore"] for i in second["items"]]
    assert [r["outcome"] for r in replays] == ["replay"] * 2 and replays[0]["replayed"]
    assert replays[0]["result"]["resource_id"] == f"{effect}-1"
    assert sink.count(effect) == 2  # one per event, not per run
    assert sink.items(effect)[0]["idempotency_key"] == f"create_invoice:{scope}-evt-1"


def test_n8n_snippet_transient_failure_then_retry_on_fail(service, sink, effect, scope, ks):
    items = [{"event_id": f"{scope}-evt-1", "amount": 5}]
    sink.fail_next(effect, 1, status=503)
    first = n8n(service, sink, effect, items)
    assert not first["ok"] and "released" in first["error"]
    retry = n8n(service, sink, effect, items)  # what "Retry On Fail" does
    assert retry["ok"] and retry["items"][0]["json"]["keystore"]["attempt"] == 2
    third = n8n(service, sink, effect, items)
    assert third["items"][0]["json"]["keystore"]["replayed"]
    assert sink.count(effect) == 1


def test_n8n_snippet_with_env_access_blocked_uses_its_fallbacks(service, sink, effect, scope):
    out = n8n(service, sink, effect, [{"event_id": f"{scope}-x"}], env_blocked=True)
    # the fallbacks point at 127.0.0.1:8080 with no token: the claim cannot succeed
    assert not out["ok"] and sink.count(effect) == 0


def test_the_n8n_http_stand_in_throws_like_n8n_on_non_2xx(sink, effect, tmp_path):
    sink.fail_next(effect, 1, status=503)
    code = tmp_path / "probe.js"
    code.write_text(textwrap.dedent(f"""
        try {{
          await this.helpers.httpRequest({{ method: 'POST', url: '{sink.url}/effects/{effect}',
                                           body: {{ a: 1 }}, json: true }});
          return [{{ json: {{ thrown: false }} }}];
        }} catch (e) {{
          return [{{ json: {{ message: e.message, status: e.response.status, code: e.code,
                              data: e.response.data }} }}];
        }}
    """))
    r = subprocess.run([NODE, str(HERE / "harness" / "n8n-code-node.mjs"), str(code)],
                       input=json.dumps({"items": [{}], "env": {}}), capture_output=True,
                       text=True, timeout=60)
    got = json.loads(r.stdout)["items"][0]["json"]
    assert got == {"message": "Request failed with status code 503", "status": 503,
                   "code": "ERR_BAD_RESPONSE", "data": {"error": "try again later"}}


# --- Code by Zapier ---------------------------------------------------------------------

def zapier_input(service, sink, effect, scope, key):
    return {"keystore_url": service.url, "keystore_token": service.token, "scope": scope,
            "key": key, "target_url": f"{sink.url}/effects/{effect}",
            "customer": "acme", "amount": "1250"}


def run_zapier_python(code: str, input_data: dict):
    """Code by Zapier's Python step: the code is the body of a function of `input_data`
    (so it may `return` early), `requests` is installed, and the result is `output`."""
    source = ("def zap(input_data):\n    output = None\n" + textwrap.indent(code, "    ")
              + "\n    return output\n")
    namespace: dict = {}
    exec(compile(source, "zapier-code.py", "exec"), namespace)
    return namespace["zap"](dict(input_data))


@pytest.mark.parametrize("language", ["js", "python"])
def test_zapier_snippet_twice_one_effect_then_replay(language, service, sink, effect, scope):
    data = zapier_input(service, sink, effect, scope, "order-1001")
    outputs = [zapier(language, data) for _ in range(2)]
    assert outputs[0]["outcome"] == "acquired" and outputs[0]["resource_id"] == f"{effect}-1"
    assert outputs[1]["outcome"] == "replay" and outputs[1]["replayed"] is True
    assert outputs[1]["resource_id"] == f"{effect}-1" and outputs[1]["status_code"] == 201
    assert sink.count(effect) == 1
    assert sink.items(effect)[0]["body"] == {"customer": "acme", "amount": "1250"}


@pytest.mark.parametrize("language", ["js", "python"])
def test_zapier_snippet_transient_failure_then_autoreplay(language, service, sink, effect,
                                                          scope):
    data = zapier_input(service, sink, effect, scope, "order-7")
    sink.fail_next(effect, 1, status=503)
    with pytest.raises(ZapierStepError, match="released"):
        zapier(language, data)
    assert zapier(language, data)["attempt"] == 2  # the autoreplay
    assert zapier(language, data)["replayed"] is True
    assert sink.count(effect) == 1


class ZapierStepError(Exception):
    pass


def zapier(language: str, input_data: dict) -> dict:
    if language == "js":
        out = node("zapier-code.mjs", "zapier-code.js", {"inputData": input_data})
        if not out["ok"]:
            raise ZapierStepError(out["error"])
        return out["output"]
    try:
        return run_zapier_python((SNIPPETS / "zapier-code.py").read_text(), input_data)
    except (RuntimeError, ValueError, requests.RequestException) as exc:
        raise ZapierStepError(str(exc)) from exc


# --- bash function with curl ------------------------------------------------------------

def bash(service, script: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "KEYSTORE_URL": service.url,
           "KEYSTORE_TOKEN": service.token}
    return subprocess.run(["bash", "-c", f"set -euo pipefail\nsource '{SNIPPETS}/keystore.sh'\n"
                           + script], env=env, capture_output=True, text=True, timeout=90)


def test_bash_function_twice_one_effect_then_replay(service, scope, tmp_path, ks):
    target = tmp_path / "out.txt"
    call = f"keystore_once {scope} 'nightly 2026-11-30' '{{\"rows\":3}}' -- " \
           f"sh -c 'echo ran >> {target}'"
    first, second = bash(service, call), bash(service, call)
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0 and "already ran (exit 0)" in second.stderr
    assert target.read_text() == "ran\n"
    record = ks.lookup(scope, "nightly 2026-11-30")
    assert record.state == "succeeded" and record.result.body == {"exit_code": 0}


def test_bash_function_failure_releases_and_mismatch_is_refused(service, scope, tmp_path):
    target = tmp_path / "out.txt"
    failing = f"keystore_once {scope} k -- sh -c 'echo ran >> {target}; exit 4'"
    assert bash(service, failing).returncode == 4
    assert bash(service, failing).returncode == 4  # released: it ran again
    assert target.read_text() == "ran\nran\n"
    ok = f"keystore_once {scope} k2 '{{\"a\":1}}' -- true"
    assert bash(service, ok).returncode == 0
    assert bash(service, ok.replace('"a":1', '"a":2')).returncode == 77


def test_bash_heartbeat_dies_with_its_shell(service, scope, tmp_path, ks):
    """`kill -9` of the shell running keystore_once: its background heartbeat must not go on
    extending the lease, so the lease runs out and the key reaches reconciliation."""
    started = tmp_path / "started"
    env = {"PATH": "/usr/bin:/bin", "KEYSTORE_URL": service.url,
           "KEYSTORE_TOKEN": service.token, "KEYSTORE_LEASE_SECONDS": "3"}  # extends every 1 s
    script = (f"set -euo pipefail\nsource '{SNIPPETS}/keystore.sh'\n"
              f"keystore_once {scope} job -- sh -c 'touch {started}; sleep 60'\n")
    shell = subprocess.Popen(["bash", "-c", script], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(started.exists, 20)
        first = ks.lookup(scope, "job").lease_expires_at
        wait_until(lambda: ks.lookup(scope, "job").lease_expires_at > first, 10)  # it beats

        os.kill(shell.pid, signal.SIGKILL)  # the shell only: the command and heartbeat live on
        shell.wait(10)
        time.sleep(1.5)  # an extend already on the wire when the shell died may still land
        after_kill = ks.lookup(scope, "job").lease_expires_at
        time.sleep(5)  # five heartbeat periods
        assert ks.lookup(scope, "job").lease_expires_at == after_kill  # not extended since

        wait_until(lambda: datetime.now(UTC) > after_kill, 10)
        rerun = bash(service, f"keystore_once {scope} job -- true")
        assert rerun.returncode == 76 and "needs reconciliation" in rerun.stderr
        assert ks.lookup(scope, "job").state == "needs_reconciliation"
    finally:
        try:
            os.killpg(shell.pid, signal.SIGKILL)  # the orphaned command (and heartbeat)
        except ProcessLookupError:
            pass


def wait_until(condition, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


# --- every snippet: a lost claim answer resumes; a duplicate waits in one request -----------

@pytest.fixture
def proxy(service):
    from .faults import FaultProxy
    p = FaultProxy(service.url).start()
    yield p
    p.stop()


def run_snippet(kind: str, url: str, service, sink, effect, scope, key: str) -> dict:
    """One run of a snippet for one event against the key store at `url`: its outcome and
    attempt, or `error` (what it threw, or the shell function's exit code)."""
    if kind == "n8n":
        env = {"KEYSTORE_URL": url, "KEYSTORE_TOKEN": service.token,
               "TARGET_URL": f"{sink.url}/effects/{effect}"}
        out = node("n8n-code-node.mjs", "n8n-code-node.js",
                   {"items": [{"event_id": key, "amount": 5}], "env": env})
        if not out["ok"]:
            return {"error": out["error"]}
        got = out["items"][0]["json"]["keystore"]
        return {"outcome": got["outcome"], "attempt": got["attempt"]}
    if kind == "bash":
        r = subprocess.run(["bash", "-c", f"set -euo pipefail\nsource '{SNIPPETS}/keystore.sh'\n"
                            f"keystore_once {scope} {key} -- curl -sf -X POST -d '{{}}' "
                            f"{sink.url}/effects/{effect}"],
                           env={"PATH": "/usr/bin:/bin", "KEYSTORE_URL": url,
                                "KEYSTORE_TOKEN": service.token, "KEYSTORE_WAIT": "20"},
                           capture_output=True, text=True, timeout=90)
        if r.returncode:
            return {"error": r.returncode}
        return {"outcome": "replay" if "already ran" in r.stderr else "acquired"}
    data = {**zapier_input(service, sink, effect, scope, key), "keystore_url": url}
    try:
        got = zapier(kind, data)
    except ZapierStepError as exc:
        return {"error": str(exc)}
    return {"outcome": got["outcome"], "attempt": got["attempt"]}


def snippet_scope(kind: str, scope: str) -> str:
    return "create_invoice" if kind == "n8n" else scope  # the n8n snippet's scope is fixed


@pytest.mark.parametrize("kind", ["n8n", "js", "python", "bash"])
def test_a_claim_whose_answer_was_lost_is_sent_again_and_resumes(kind, service, proxy, sink,
                                                                  effect, scope, ks):
    key = f"{scope}-lost"
    proxy.drop_answer("/v1/claim")  # the claim lands; its answer never comes back
    got = run_snippet(kind, proxy.url, service, sink, effect, scope, key)
    assert got.get("outcome") == "acquired", got
    assert proxy.seen["/v1/claim"] == 2 and sink.count(effect) == 1
    record = ks.lookup(snippet_scope(kind, scope), key)
    assert (record.state, record.attempt) == ("succeeded", 1)  # not left to reconciliation


@pytest.mark.parametrize("kind", ["n8n", "js", "python", "bash"])
def test_a_duplicate_waits_in_one_request_and_is_counted_once(kind, service, proxy, sink,
                                                              effect, scope, ks):
    key = f"{scope}-busy"
    where = snippet_scope(kind, scope)
    holder = ks.claim(where, key, lease_seconds=60)
    timer = threading.Timer(1.0, lambda: ks.complete(where, key, holder.lease_token,
                                                     result={"resource_id": "INV-1"}))
    timer.start()
    try:
        got = run_snippet(kind, proxy.url, service, sink, effect, scope, key)
    finally:
        timer.join()
    assert got.get("outcome") == "replay", got
    assert dict(proxy.seen) == {"/v1/claim": 1}  # no lookups, no claim-again loop
    assert sink.count(effect) == 0 and ks.lookup(where, key).duplicate_count == 1


@pytest.mark.parametrize("wait", ["abc", "-1", "1.5", "٣", "99999", ""])
def test_bash_function_refuses_a_wait_it_cannot_send(service, scope, tmp_path, wait):
    target = tmp_path / "out.txt"
    r = subprocess.run(["bash", "-c", f"set -euo pipefail\nsource '{SNIPPETS}/keystore.sh'\n"
                        f"keystore_once {scope} k -- touch {target}"],
                       env={"PATH": "/usr/bin:/bin", "KEYSTORE_URL": service.url,
                            "KEYSTORE_TOKEN": service.token, "KEYSTORE_WAIT": wait},
                       capture_output=True, text=True, timeout=60)
    if wait == "":  # empty is unset: the default, 30
        assert r.returncode == 0 and target.exists()
    else:
        assert r.returncode == 64 and "KEYSTORE_WAIT" in r.stderr and not target.exists()
