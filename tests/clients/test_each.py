"""`keystore-client each` as a poller's pipeline runs it: a real process per run, JSON lines
on its stdin, against the real service on both backends. The command appends the line it was
given to a file, so the file says how often it really ran, and for which records."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from datetime import UTC, datetime

import pytest
from keystore_client import InProgress
from keystore_client._cli.lines import Fields, Unusable, parse

from .support import CLI, lines

# The line on stdin is appended to $1; a line with "fail": true exits 3 until the file $2
# exists; a line with "wait": true first touches $1.started, then waits for $1.go.
COMMAND = r"""
line=$(cat)
case "$line" in *'"wait": true'*)
  : > "$1.started"; n=0
  while [ ! -e "$1.go" ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done;;
esac
printf '%s\n' "$line" >> "$1"
case "$line" in *'"fail": true'*) [ -e "$2" ] || { echo "no luck" >&2; exit 3; };; esac
echo "did $line"
"""


@pytest.fixture
def effects(tmp_path):
    return tmp_path / "effects.txt"


def jsonl(*records) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def each_args(scope, effects, *options):
    return ["each", "--scope", scope, "--key-field", "id", *options, "--", "sh", "-c",
            COMMAND, "sh", str(effects), str(effects) + ".fixed"]


def env(service) -> dict:
    return {**os.environ, "KEYSTORE_URL": service.url, "KEYSTORE_TOKEN": service.token}


def each(service, scope, effects, stdin: str, *options) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *each_args(scope, effects, *options)], input=stdin,
                          env=env(service), capture_output=True, text=True, timeout=90)


def start(service, scope, effects, stdin: str, *options) -> subprocess.Popen:
    """`each` in the background, its input from a file (as a finished producer's would be)."""
    source = effects.parent / "input.jsonl"
    source.write_text(stdin)
    with open(source, "rb") as f:
        return subprocess.Popen([CLI, *each_args(scope, effects, *options)], stdin=f,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env(service), text=True)


def ids(effects) -> list:
    return [json.loads(line)["id"] for line in lines(effects)]


def test_the_same_input_twice_runs_the_command_once_per_record(service, scope, effects, ks):
    window = jsonl({"id": 1, "total": 10}, {"id": 2, "total": 20}, {"id": 2, "total": 20},
                   {"id": "3", "total": 30})  # the poll window re-delivered order 2
    first = each(service, scope, effects, window, "--progress", "0")
    assert first.returncode == 0, first.stderr
    assert ids(effects) == [1, 2, "3"]
    assert first.stdout.splitlines()[0] == f"did {json.dumps({'id': 1, 'total': 10})}"
    assert "line 3 (key 2): already done (succeeded)" in first.stderr
    assert "progress: 2 lines: 2 ran" in first.stderr
    assert first.stderr.rstrip().endswith("4 lines: 3 ran, 1 already done")

    again = each(service, scope, effects, window)
    assert again.returncode == 0 and ids(effects) == [1, 2, "3"]  # nothing ran twice
    assert again.stderr.rstrip().endswith("4 lines: 4 already done")
    record = ks.lookup(scope, "1")
    assert record.state == "succeeded" and record.result.body["exit_code"] == 0
    assert record.result.body["stdout"].startswith("did ")


def test_a_newer_version_runs_again_an_older_or_equal_one_does_not(service, scope, effects):
    options = ("--version-field", "v", "--payload-field", "total")  # v's spelling may vary
    first = each(service, scope, effects, jsonl(
        {"id": "a", "v": 1, "total": 1}, {"id": "a", "v": 2, "total": 2},  # in order
        {"id": "b", "v": "2026-11-30T10:00:00Z", "total": 5}), *options)
    assert first.returncode == 0, first.stderr
    assert [(r["id"], r["v"]) for r in map(json.loads, lines(effects))] == \
        [("a", 1), ("a", 2), ("b", "2026-11-30T10:00:00Z")]

    second = each(service, scope, effects, jsonl(
        {"id": "a", "v": 1, "total": 1},  # older
        {"id": "a", "v": 2, "total": 2},  # equal
        {"id": "b", "v": "2026-11-30T11:00:00+01:00", "total": 5},  # equal, with an offset
        {"id": "b", "v": "2026-11-30T05:00:00.5-05:00", "total": 6},  # newer by 0.5 s
        {"id": "a", "v": 3, "total": 3},  # newer
        {"id": "a", "v": "2026-12-01T00:00:00Z", "total": 3}),  # the other kind: refused
        *options)
    assert second.returncode == 65, second.stderr  # an unusable line, nothing failed
    assert [(r["id"], r["v"]) for r in map(json.loads, lines(effects))][3:] == \
        [("b", "2026-11-30T05:00:00.5-05:00"), ("a", 3)]
    assert "line 1 (key a): already done (succeeded, version 2)" in second.stderr
    assert "line 3 (key b): already done (succeeded, version 2026-11-30T10:00:00Z)" in \
        second.stderr
    assert "line 6 (key a): refused: this record's versions are of the other kind" in \
        second.stderr
    assert second.stderr.rstrip().endswith("6 lines: 2 ran, 3 already done, 1 unusable")

    # the same key and version with other content: refused, for a person (exit 77)
    third = each(service, scope, effects, jsonl({"id": "a", "v": 3, "total": 4}), *options)
    assert third.returncode == 77, third.stderr
    assert "line 1 (key a): refused: the key store holds this key (succeeded, version 3) " \
        "with a different payload at the same or a newer version" in third.stderr


def test_a_failed_record_that_changed_before_the_next_poll_runs_again(service, scope,
                                                                      effects):
    """Issue 13, item 17: the first attempt failed (released), the record changed before the
    next poll: v1 refused it as a mismatch ("done before", which was false) and the key
    stayed stuck. A newer version is a new intent."""
    first = each(service, scope, effects, jsonl({"id": "x", "v": 1, "fail": True}),
                 "--version-field", "v")
    assert first.returncode == 123, first.stderr
    second = each(service, scope, effects, jsonl({"id": "x", "v": 2, "total": 9}),
                  "--version-field", "v")
    assert second.returncode == 0, second.stderr
    assert [json.loads(line)["v"] for line in lines(effects)] == [1, 2]


def test_a_failing_command_leaves_its_record_to_the_next_run_and_the_others_go_on(
        service, scope, effects, ks):
    window = jsonl({"id": 1}, {"id": 2, "fail": True}, {"id": 3})
    first = each(service, scope, effects, window, "--batch", "2")
    assert first.returncode == 123, first.stderr
    assert ids(effects) == [1, 2, 3]
    assert "line 2 (key 2): exit code 3; released, the next run tries again" in first.stderr
    assert first.stderr.rstrip().endswith("3 lines: 2 ran, 1 failed")
    assert [ks.lookup(scope, k).state for k in "123"] == ["succeeded", "released",
                                                          "succeeded"]
    (effects.parent / "effects.txt.fixed").touch()
    second = each(service, scope, effects, window)
    assert second.returncode == 0 and ids(effects) == [1, 2, 3, 2]  # only the failed one
    assert ks.lookup(scope, "2").attempt == 2

    # --on-failure record: the failure is final for this version, and replayed as done
    other = effects.parent / "other.txt"  # no .fixed file beside it: it keeps failing
    runs = [each(service, f"{scope}r", other, jsonl({"id": 9, "fail": True}), "--on-failure",
                 "record") for _ in range(2)]
    assert [r.returncode for r in runs] == [123, 0] and len(lines(other)) == 1
    assert "already done (failed)" in runs[1].stderr
    assert ks.lookup(f"{scope}r", "9").result.body["exit_code"] == 3


def test_unusable_lines_are_reported_and_skipped(service, scope, effects):
    stdin = ('{"id": 1}\nnot json\n\n{"name": "no id"}\n{"id": 1.5}\n{"id": {"n": 2}}\n'
             '{"id": 2, "id": 3}\n{"id": 4}\n')
    r = each(service, scope, effects, stdin)
    assert r.returncode == 65, r.stderr
    assert ids(effects) == [1, 4]
    for note in ("line 2: not JSON", "line 4: no key field 'id'",
                 "line 5: the key field 'id' is a number with a fraction",
                 "line 6: the key field 'id' is an object", "line 7: not JSON (a field name"):
        assert note in r.stderr, note
    assert r.stderr.rstrip().endswith("7 lines: 2 ran, 5 unusable")


def test_the_leases_of_a_batch_are_kept_alive_while_earlier_commands_run(
        service, scope, effects, ks):
    """Lease 3 s; the first command runs past it. The second line's lease, taken by the same
    batch claim, must still be live then (extended in the background), not stale."""
    p = start(service, scope, effects, jsonl({"id": "k1", "wait": True}, {"id": "k2"}),
              "--lease-seconds", "3")
    started = effects.parent / "effects.txt.started"
    _poll(started.exists, "the first command to start")
    first_lease = ks.lookup(scope, "k2").lease_expires_at
    _poll(lambda: datetime.now(UTC).timestamp() >
          first_lease.timestamp() + 0.5, "the first lease to pass")
    with pytest.raises(InProgress):  # extended: not needs_reconciliation
        ks.claim(scope, "k2")
    assert ks.lookup(scope, "k1").lease_expires_at > first_lease
    (effects.parent / "effects.txt.go").touch()
    _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert ids(effects) == ["k1", "k2"]
    for key in ("k1", "k2"):
        record = ks.lookup(scope, key)
        assert (record.state, record.attempt, record.review) == ("succeeded", 1, None)


def test_sigterm_releases_the_records_not_run_and_leaves_the_running_one(
        service, scope, effects, ks):
    p = start(service, scope, effects, jsonl({"id": "k1", "wait": True}, {"id": "k2"},
                                             {"id": "k3"}))
    _poll((effects.parent / "effects.txt.started").exists, "the first command to start")
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGTERM, err
    assert "3 lines: 1 failed, 2 released unrun" in err
    assert not effects.exists()  # k1 was stopped before its effect; k2, k3 never started
    assert ks.lookup(scope, "k1").state == "in_progress"  # unknown outcome: left to its lease
    assert [ks.lookup(scope, k).state for k in ("k2", "k3")] == ["released"] * 2


def _poll(condition, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


# --- reading lines (no service needed) ------------------------------------------------------

@pytest.mark.parametrize("raw, fields, expected", [
    (b'{"id": 7, "v": 3}', Fields("id", "v"), ("7", 3, {"id": 7, "v": 3})),
    (b'{"order": {"id": "A-1"}, "at": "2026-11-30T10:00:00+01:00", "body": null}',
     Fields("order.id", "at", "body"), ("A-1", "2026-11-30T10:00:00+01:00", None)),
    (b'{"a.b": "top", "a": {"b": "nested"}}', Fields("a.b"),
     ("top", None, {"a.b": "top", "a": {"b": "nested"}})),
    (b'{"id": " x "}', Fields("id"), (" x ", None, {"id": " x "})),  # used exactly
])
def test_a_line_becomes_one_claim(raw, fields, expected):
    line = parse(1, raw, fields)
    assert (line.key, line.version, line.payload) == expected
    assert line.stdin == raw + b"\n"


@pytest.mark.parametrize("raw, fields, reason", [
    (b'[1, 2]', Fields("id"), "not a JSON object"),
    (b'{"id": NaN}', Fields("id"), "not JSON"),
    (b'{"id": true}', Fields("id"), "is a boolean"),
    (b'{"id": ""}', Fields("id"), "empty"),
    (b'{"id": "a\\u0007b"}', Fields("id"), "control characters"),
    (b'{"id": 1}', Fields("id", "v"), "no version field 'v'"),
    (b'{"id": 1, "v": 1.5}', Fields("id", "v"), "a number with a fraction"),
    (b'{"id": 1, "v": [1]}', Fields("id", "v"), "is an array"),
    (b'{"id": 1}', Fields("id", None, "body"), "no payload field 'body'"),
])
def test_an_unusable_line_says_why(raw, fields, reason):
    with pytest.raises(Unusable, match=reason):
        parse(1, raw, fields)
