"""`keystore-client` as a cron job or CI step would run it: a real process per run, against
the real service on both backends. The command appends a line to a file, so the file says how
often it really ran."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from keystore_client import KeyStore

from .support import CLI, lines

APPEND = 'echo "ran $$" >> "$1"; echo "appended"; echo "to stderr" >&2'


def cli(service, *args, env=None, token=None, timeout=60, **popen):
    full_env = {**os.environ, "KEYSTORE_URL": service.url,
                "KEYSTORE_TOKEN": token or service.token, **(env or {})}
    return subprocess.run([CLI, *args], env=full_env, capture_output=True, text=True,
                          timeout=timeout, **popen)


def run_args(scope, key, target, *extra, script=APPEND):
    return ["run", "--scope", scope, "--key", key, *extra, "--", "sh", "-c", script, "sh",
            str(target)]


def test_ten_concurrent_and_ten_sequential_runs_append_one_line(service, scope, tmp_path):
    """The key store waits for a duplicate while it has a waiting seat for the token (two
    per worker here); a duplicate without one, or whose claim races the first one's insert
    (answered in_progress at once), exits 75 (try later), and its next run replays. Never a
    second run."""
    target = tmp_path / "out.txt"
    env = {**os.environ, "KEYSTORE_URL": service.url, "KEYSTORE_TOKEN": service.token}
    slow = APPEND + "; sleep 0.5"  # the others arrive while the first one still runs
    procs = [subprocess.Popen([CLI, *run_args(scope, "2026-11-30", target, script=slow)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(10)]
    outs = [p.communicate(timeout=90) for p in procs]
    codes = [p.returncode for p in procs]
    assert set(codes) <= {0, 75} and codes.count(0) >= 1, outs  # the first (and the waiters)
    pairs = list(zip(outs, codes, strict=True))
    assert all(out == "appended\n" for (out, _), code in pairs if code == 0)
    assert all("in_progress" in err for (_, err), code in pairs if code == 75)
    for _ in range(10):
        r = cli(service, *run_args(scope, "2026-11-30", target))
        assert (r.returncode, r.stdout) == (0, "appended\n")
        assert "to stderr" in r.stderr and "already ran" in r.stderr
    assert len(lines(target)) == 1


def test_a_wait_beyond_the_key_stores_limit_is_a_usage_error(service, scope, tmp_path):
    for wait in ("31", "-1", "nan", "inf", "٣"):
        r = cli(service, *run_args(scope, "k", tmp_path / "out.txt", "--wait", wait))
        assert r.returncode == 64 and "--wait" in r.stderr, (wait, r.stderr)
    assert not (tmp_path / "out.txt").exists()


def test_failing_command_runs_again_under_release(service, scope, tmp_path):
    target = tmp_path / "out.txt"
    failing = APPEND + "; exit 3"
    for n in (1, 2):
        r = cli(service, *run_args(scope, "k", target, script=failing))
        assert r.returncode == 3 and "released" in r.stderr
        assert len(lines(target)) == n  # really ran again
    ok = cli(service, *run_args(scope, "k", target))
    assert ok.returncode == 0 and len(lines(target)) == 3
    assert KeyStore(service.url, service.token).lookup(scope, "k").attempt == 3


def test_failing_command_is_replayed_with_its_exit_code_under_record(service, scope, tmp_path):
    target = tmp_path / "out.txt"
    failing = APPEND + "; exit 3"
    first = cli(service, *run_args(scope, "k", target, "--on-failure", "record", script=failing))
    assert first.returncode == 3
    again = cli(service, *run_args(scope, "k", target, "--on-failure", "record", script=failing))
    assert (again.returncode, again.stdout) == (3, "appended\n")
    assert "already ran (failed, exit code 3)" in again.stderr
    assert len(lines(target)) == 1
    record = KeyStore(service.url, service.token).lookup(scope, "k")
    assert record.state == "failed" and record.result.body["exit_code"] == 3


def test_in_progress_after_the_wait_exits_75(service, ks, scope, tmp_path):
    ks.claim(scope, "k", lease_seconds=60)  # someone else is running it
    started = time.monotonic()
    r = cli(service, *run_args(scope, "k", tmp_path / "out.txt", "--wait", "1"))
    assert r.returncode == 75 and "in_progress" in r.stderr
    assert time.monotonic() - started < 20 and not (tmp_path / "out.txt").exists()


def test_needs_reconciliation_exits_76_and_mismatch_exits_77(service, ks, scope, tmp_path):
    ks.claim(scope, "stale", lease_seconds=1)
    r = cli(service, *run_args(scope, "stale", tmp_path / "a.txt", "--wait", "10"))
    assert r.returncode == 76 and "needs_reconciliation" in r.stderr

    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps({"rows": 10}))
    assert cli(service, *run_args(scope, "p", tmp_path / "b.txt", "--payload-file",
                                  str(payload))).returncode == 0
    payload.write_text('{"rows":   10}')  # the same JSON, formatted differently: a replay
    assert cli(service, *run_args(scope, "p", tmp_path / "b.txt", "--payload-file",
                                  str(payload))).returncode == 0
    payload.write_text(json.dumps({"rows": 11}))
    r = cli(service, *run_args(scope, "p", tmp_path / "b.txt", "--payload-file", str(payload)))
    assert r.returncode == 77 and "fingerprint_mismatch" in r.stderr
    assert len(lines(tmp_path / "b.txt")) == 1
    assert not (tmp_path / "a.txt").exists()


def test_a_missing_command_releases_the_key_and_exits_127(service, ks, scope, tmp_path):
    r = cli(service, "run", "--scope", scope, "--key", "k", "--", "/no/such/command")
    assert r.returncode == 127
    assert ks.lookup(scope, "k").state == "released"


def test_a_command_killed_by_a_signal_leaves_the_key_to_its_lease(service, ks, scope, tmp_path):
    r = cli(service, *run_args(scope, "k", tmp_path / "out.txt", script=APPEND + "; kill -9 $$"))
    assert r.returncode == 128 + signal.SIGKILL
    assert ks.lookup(scope, "k").state == "in_progress"  # unknown outcome: not released


def test_sigterm_to_keystore_client_is_forwarded_and_the_key_left(service, ks, scope, tmp_path):
    target = tmp_path / "out.txt"
    env = {**os.environ, "KEYSTORE_URL": service.url, "KEYSTORE_TOKEN": service.token}
    p = subprocess.Popen([CLI, *run_args(scope, "k", target, script=APPEND + "; sleep 30")],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not lines(target) and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    assert p.wait(30) == 128 + signal.SIGTERM
    p.communicate(timeout=10)
    assert ks.lookup(scope, "k").state == "in_progress"


def test_url_and_token_flags_and_a_refused_token(service, scope, tmp_path):
    no_env = {k: v for k, v in os.environ.items() if not k.startswith("KEYSTORE_")}
    args = run_args(scope, "k", tmp_path / "out.txt")
    r = subprocess.run([CLI, "--url", service.url, "--token", service.token, *args],
                       env=no_env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and len(lines(tmp_path / "out.txt")) == 1
    assert cli(service, *args, token="ks_not_a_token").returncode == 78


def test_configuration_and_usage_errors(tmp_path):
    no_env = {k: v for k, v in os.environ.items() if not k.startswith("KEYSTORE_")}
    r = subprocess.run([CLI, *run_args("s", "k", tmp_path / "out.txt")], env=no_env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 78 and "KEYSTORE_URL" in r.stderr
    r = subprocess.run([CLI, "run", "--scope", "s"], capture_output=True, timeout=60)
    assert r.returncode == 64
    r = subprocess.run([CLI, "derive-key", " acme ", "2026|W48"], capture_output=True,
                       text=True, timeout=60)
    assert (r.returncode, r.stdout) == (0, "acme|2026%7CW48\n")
    assert not (tmp_path / "out.txt").exists()


def test_lookup_prints_the_record(service, ks, scope):
    with ks.once(scope, "k") as op:
        op.succeed(body={"exit_code": 0, "stdout": "done\n"})
    r = cli(service, "lookup", "--scope", scope, "--key", "k")
    record = json.loads(r.stdout)
    assert r.returncode == 0 and record["state"] == "succeeded"
    assert record["result"]["body"]["stdout"] == "done\n"
    assert record["first_seen_at"].endswith("Z")
    assert cli(service, "lookup", "--scope", scope, "--key", "nope").returncode == 66


@pytest.mark.parametrize("size", [300 * 1024])
def test_large_output_is_kept_as_a_tail_within_the_result_limit(service, scope, size, tmp_path):
    script = f'head -c {size} /dev/zero | tr "\\0" "x"; echo; echo END'
    r = cli(service, "run", "--scope", scope, "--key", "k", "--", "sh", "-c", script)
    assert r.returncode == 0 and len(r.stdout) == size + 5  # passed through whole
    again = cli(service, "run", "--scope", scope, "--key", "k", "--", "sh", "-c", script)
    assert again.returncode == 0 and again.stdout.endswith("x\nEND\n")
    assert len(again.stdout) < size  # what is stored is the tail


@pytest.mark.parametrize("args", [
    ("--timeout", "nan", "lookup", "--scope", "s", "--key", "k"),
    ("--timeout", "inf", "lookup", "--scope", "s", "--key", "k"),
    ("lookup", "--scope", "s", "--key", "k", "--wait", "٣"),
    ("lookup", "--scope", "s", "--key", "k", "--wait", "31"),
    ("run", "--scope", "s", "--key", "k", "--lease-seconds", "٦٠", "--", "true"),
    ("run", "--scope", "s", "--key", "k", "--ttl-seconds", "1e9", "--", "true"),
    ("each", "--scope", "s", "--key-field", "id", "--batch", "²", "--", "true"),
    ("each", "--scope", "s", "--key-field", "id", "--progress", "nan", "--", "true"),
])
def test_numbers_are_ascii_finite_and_in_range(args):
    # int() reads "٦٠" as 60 and float() takes "nan", which passes any bound check
    out = subprocess.run([CLI, "--url", "http://127.0.0.1:9", "--token", "t", *args],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 64, (args, out.stderr)  # usage, before anything is sent
    assert "error: argument --" in out.stderr and "Traceback" not in out.stderr
