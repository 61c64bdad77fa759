"""`keystore-client run`: run a command at most once per (scope, key).

The first run claims the key, runs the command and, on exit 0, completes with the exit code
and the captured output. A repeat prints the stored output and exits with the stored code. A
non-zero exit releases the key so the next run tries again (`--on-failure release`), or is
recorded and replayed like a success (`--on-failure record`). A command killed by a signal
has an unknown outcome: the key is left to its lease and reconciliation. Another run holding
the key is waited for up to --wait seconds (at most 30: the key store waits, one request);
still running then, the exit code is 75 (try later).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from typing import Any, Optional

from .._client import MAX_WAIT_SECONDS, KeyStore
from .._models import Record
from . import exits
from .capture import Finished, run_command
from .numbers import whole
from .output import note, say

MAX_RESULT_BYTES = 200 * 1024  # under docs/api.md's 256 KiB result body, with a margin


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run", help="run a command at most once per key",
        description=__doc__.split("\n\n", 1)[1],
        usage="keystore-client run --scope S --key K [options] -- COMMAND [ARGS...]")
    p.add_argument("--scope", required=True, help="the kind of operation, e.g. nightly_export")
    p.add_argument("--key", required=True, help="the stable id of this run, e.g. 2026-11-30")
    p.add_argument("--payload-file", metavar="FILE",
                   help="what the run is about: a JSON file is compared by content, any "
                        "other file byte for byte; a repeat with a different file is refused")
    p.add_argument("--on-failure", choices=("release", "record"), default="release",
                   help="non-zero exit: release the key to run again (default), or record "
                        "the failure and replay it")
    p.add_argument("--wait", type=_wait, default=float(MAX_WAIT_SECONDS), metavar="SECONDS",
                   help=f"how long to wait for another run holding the key, 0-"
                        f"{MAX_WAIT_SECONDS} (default: {MAX_WAIT_SECONDS})")
    p.add_argument("--lease-seconds", type=whole(1), default=60, metavar="SECONDS",
                   help="lease, renewed in the background while the command runs (default: 60)")
    p.add_argument("--ttl-seconds", type=whole(1), metavar="SECONDS",
                   help="how long the outcome is remembered (default: the service's, 72 h)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command and its arguments")
    p.set_defaults(handler=main, needs_keystore=True)


def _wait(text: str) -> float:
    """--wait: 0-30 seconds, ASCII digits (float() also takes "٣" and "inf")."""
    try:
        seconds = float(text) if text.isascii() else -1.0
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= MAX_WAIT_SECONDS:  # also false for nan
        raise argparse.ArgumentTypeError(f"a number of seconds from 0 to {MAX_WAIT_SECONDS} "
                                         "(the key store waits at most that long per claim)")
    return seconds


def main(args: argparse.Namespace, ks: KeyStore) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        say("keystore-client run: no command given (put it after --)")
        return exits.USAGE
    try:
        payload, fingerprint = _payload(args.payload_file)
    except OSError as exc:
        say(f"keystore-client run: cannot read --payload-file: {exc.strerror}")
        return exits.USAGE
    with ks.once(args.scope, args.key, payload=payload, fingerprint=fingerprint,
                 lease_seconds=args.lease_seconds, ttl_seconds=args.ttl_seconds,
                 wait=args.wait) as op:
        if op.replayed:
            return _replay(args, op.record)
        try:
            finished = run_command(command)
        except OSError as exc:
            op.release(reason="the command could not be started")
            say(f"keystore-client run: cannot run {command[0]!r}: {exc.strerror}")
            return exits.NOT_FOUND if isinstance(exc, FileNotFoundError) else exits.CANNOT_EXECUTE
        code = finished.returncode
        if code < 0:
            op.abandon()
            note(args, f"the command was killed by signal {-code}; {args.scope}/{args.key} is "
                       "left to its lease and then to reconciliation")
            return exits.SIGNAL_BASE - code
        body = result_body(finished)
        if code == 0:
            op.succeed(body=body)
        elif args.on_failure == "record":
            op.fail(body=body)
            note(args, f"exit code {code} recorded for {args.scope}/{args.key}; repeats replay it")
        else:
            op.release(reason=f"exit code {code}")
            note(args, f"exit code {code}: {args.scope}/{args.key} released, the next run retries")
        return code


def _payload(path: Optional[str]) -> tuple:
    """(payload, fingerprint) for the claim: a JSON file's content, or a hash of the bytes."""
    if path is None:
        return None, None
    with open(path, "rb") as f:
        data = f.read()
    try:
        value = json.loads(data)
    except ValueError:
        value = None
    if value is not None:
        return value, None
    return None, "file-sha256:" + hashlib.sha256(data).hexdigest()


def result_body(f: Finished) -> dict:
    """The stored result: exit code and the output's tail, cut to fit docs/api.md's limit."""
    out, err, truncated = f.stdout, f.stderr, f.truncated
    while True:
        body = {"exit_code": f.returncode, "stdout": out.decode("utf-8", "replace"),
                "stderr": err.decode("utf-8", "replace"), "truncated": truncated}
        size = len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
        if size <= MAX_RESULT_BYTES:
            return body
        out, err, truncated = out[len(out) // 2:], err[len(err) // 2:], True


def _replay(args: argparse.Namespace, record: Record) -> int:
    body = record.result.body if record.result else None
    body = body if isinstance(body, dict) else {}
    code = body.get("exit_code")
    if not isinstance(code, int):
        code = 0 if record.state == "succeeded" else 1  # finished by someone other than run
    sys.stdout.write(body.get("stdout") or "")
    sys.stdout.flush()
    sys.stderr.write(body.get("stderr") or "")
    note(args, f"{args.scope}/{args.key} already ran ({record.state}, exit code {code}); "
               "replayed its output, the command was not run again")
    return code
