"""`keystore-client each`: run a command once per new record, or newer version of a record, of
a stream of JSON lines: for pollers whose fetch windows overlap.

    fetch-orders | keystore-client each --scope orders --key-field id \\
        --version-field updated_at -- create-invoice

Lines are claimed in batches. For each line whose record is acquired (a new key, a newer
version, or a record a failed run gave back), the command runs with the line on its stdin.
Exit 0 completes the record with the exit code and output; any other exit releases it for
the next run (--on-failure release) or records the failure (--on-failure record). A record
is never marked done before its command succeeded, and a failing record does not stop the
others. Lines already done, in progress elsewhere, needing reconciliation or refused are
skipped with a note; a summary ends the run. The leases of a batch are kept alive while
earlier lines' commands run.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from typing import Any, Optional

from .._batch import MAX_ITEMS, BatchResult
from .._client import KeyStore
from .._exceptions import (
    AlreadyCompleted,
    APIError,
    Expired,
    KeyStoreError,
    LeaseLost,
    NotFound,
)
from .._lease import LeaseKeeper
from .._models import Result
from . import exits
from .capture import FORWARDED, Finished, run_command
from .claims import claim_lines, reason
from .lines import Fields, Line, Reader, batches
from .numbers import seconds, whole
from .output import say
from .run import result_body
from .tally import Tally

SETTLE_ERRORS = (LeaseLost, AlreadyCompleted, NotFound, Expired)  # about one record only


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "each", help="run a command once per new or changed record of JSON lines on stdin",
        description=__doc__.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="keystore-client each --scope S --key-field F [options] -- COMMAND [ARGS...]")
    p.add_argument("--scope", required=True, help="the kind of operation, e.g. orders")
    p.add_argument("--key-field", required=True, metavar="F",
                   help="the field with the record's id (a dotted path reaches nested ones)")
    p.add_argument("--version-field", metavar="V",
                   help="the field with its version: an integer (a revision) or an RFC 3339 "
                        "time (updated_at); a newer version runs the command again")
    p.add_argument("--payload-field", metavar="P",
                   help="what the record is about, compared on repeats (default: the whole "
                        "line)")
    p.add_argument("--batch", type=whole(1, MAX_ITEMS), default=100, metavar="N",
                   help=f"lines per claim, 1-{MAX_ITEMS} (default: 100)")
    p.add_argument("--on-failure", choices=("release", "record"), default="release",
                   help="non-zero exit: release the record for the next run (default), or "
                        "record the failure so that this version is not run again")
    p.add_argument("--lease-seconds", type=whole(1), default=60, metavar="SECONDS",
                   help="lease, renewed in the background for the whole batch (default: 60)")
    p.add_argument("--ttl-seconds", type=whole(1), metavar="SECONDS",
                   help="how long outcomes are remembered (default: the service's, 72 h); "
                        "longer than any overlap of the fetch windows")
    p.add_argument("--progress", type=seconds(0, 86400), default=10.0, metavar="SECONDS",
                   help="a progress line on stderr every SECONDS (default: 10; 0: each line)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command and its arguments")
    p.set_defaults(handler=main, needs_keystore=True)


def main(args: argparse.Namespace, ks: KeyStore) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        say("keystore-client each: no command given (put it after --)")
        return exits.USAGE
    return Each(args, ks, command).run()


class _Stop(Exception):
    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


class Each:
    def __init__(self, args: argparse.Namespace, ks: KeyStore, command: list):
        self.args, self.ks, self.command = args, ks, command
        self.fields = Fields(args.key_field, args.version_field, args.payload_field)
        self.tally = Tally()
        self.signal: Optional[int] = None
        self.last_progress = time.monotonic()

    def run(self) -> int:
        previous = _catch_signals(self._on_signal)
        code: Optional[int] = None
        try:
            reader = Reader(sys.stdin.buffer).start()
            for batch in batches(reader, self.fields, self.args.batch, self._unusable,
                                 lambda: self.signal is not None):
                self._batch(batch)
                if self.signal is not None:
                    break
        except _Stop as stop:
            code = stop.code
        except KeyStoreError:
            self._tell(f"stopped: {self.tally.summary()}", always=True)
            raise
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
        if self.signal is not None:
            code = exits.SIGNAL_BASE + self.signal
        code = self.tally.exit_code() if code is None else code
        self._tell(self.tally.summary(), always=code != 0)
        return code

    def _on_signal(self, signum: int, _frame: object = None) -> None:
        if self.signal is None:
            self.signal = signum

    # --- one batch ------------------------------------------------------------------------

    def _batch(self, batch: list) -> None:
        pairs = list(zip(batch, claim_lines(self.ks, self.args, batch)))
        waiting = {line.number: (line, r) for line, r in pairs
                   if isinstance(r, BatchResult) and r.acquired}
        keeper = LeaseKeeper(self.ks, self.args.scope, lease_seconds=self.args.lease_seconds)
        for line, r in waiting.values():
            keeper.hold(line.key, r.lease_token)
        if waiting:
            keeper.start()
        try:
            for line, r in pairs:
                if self.signal is not None:
                    break
                waiting.pop(line.number, None)
                self._one(line, r, keeper)
                self._progress()
        finally:
            keeper.stop()
            for line, r in waiting.values():  # acquired, never started: give them back
                self.tally.not_run += 1
                self._release(line, r.lease_token, "keystore-client each stopped first")

    def _one(self, line: Line, r: Any, keeper: LeaseKeeper) -> None:
        where = f"line {line.number} (key {line.key})"
        if isinstance(r, APIError):
            self.tally.unusable += 1
            self._tell(f"{where}: refused: {reason(r)}; skipped", always=True)
        elif r.acquired:
            self._run(line, r, keeper, where)
        elif r.outcome == "replay":
            self.tally.done += 1
            version = "" if r.record.version is None else f", version {r.record.version}"
            self._tell(f"{where}: already done ({r.record.state}{version}); skipped")
        elif r.outcome == "in_progress":
            self.tally.busy += 1
            self._tell(f"{where}: in progress elsewhere (its lease ends in "
                       f"{r.retry_after or 0:.0f} s); skipped, a later run tries again")
        elif r.outcome == "needs_reconciliation":
            self.tally.reconcile += 1
            self._tell(f"{where}: an earlier attempt ended with an unknown outcome; a person "
                       "must resolve it (the service's reviews); skipped", always=True)
        elif r.outcome == "fingerprint_mismatch":
            self.tally.mismatch += 1
            stored = r.record
            held = "" if stored is None else f" ({stored.state}" + (
                "" if stored.version is None else f", version {stored.version}") + ")"
            at = "" if line.version is None else " at the same or a newer version"
            self._tell(f"{where}: refused: the key store holds this key{held} with a "
                       f"different payload{at}; a person decides (the service's reviews); "
                       "skipped", always=True)
        else:  # "invalid" (a version of the other kind), or an outcome newer than this client
            self.tally.unusable += 1
            self._tell(f"{where}: refused: {reason(r.error) if r.error else r.outcome}; "
                       "skipped", always=True)

    # --- one acquired record -----------------------------------------------------------------

    def _run(self, line: Line, r: BatchResult, keeper: LeaseKeeper, where: str) -> None:
        lost = keeper.lost_of(line.key)
        if lost is not None:
            self.tally.failed += 1
            self._tell(f"{where}: its lease was taken over before its turn ({lost.code}); "
                       "not run", always=True)
            return
        try:
            finished = run_command(self.command, stdin=line.stdin)
        except OSError as exc:
            keeper.drop(line.key)
            self.tally.failed += 1
            self._release(line, r.lease_token, "the command could not be started")
            say(f"keystore-client each: cannot run {self.command[0]!r}: {exc.strerror}")
            raise _Stop(exits.NOT_FOUND if isinstance(exc, FileNotFoundError)
                        else exits.CANNOT_EXECUTE) from None
        keeper.drop(line.key)
        if finished.signals:
            self._on_signal(finished.signals[0])
        self._settle(line, r, finished, keeper.lost_of(line.key), where)

    def _settle(self, line: Line, r: BatchResult, finished: Finished,
                lost: Optional[APIError], where: str) -> None:
        code, scope, token = finished.returncode, self.args.scope, r.lease_token
        if lost is not None or code < 0:
            self.tally.failed += 1
            why = (f"its lease was taken over meanwhile ({lost.code}): its outcome is not "
                   "recorded by this run" if lost is not None else
                   f"killed by signal {-code}: an unknown outcome, left to its lease and then "
                   "to reconciliation")
            self._tell(f"{where}: the command {why}", always=True)
            return
        body = Result(body=result_body(finished))
        try:
            if code == 0:
                self.ks.complete(scope, line.key, token, result=body)
                self.tally.ran += 1
                return
            self.tally.failed += 1
            if self.args.on_failure == "record":
                self.ks.complete(scope, line.key, token, state="failed", result=body)
                self._tell(f"{where}: exit code {code}, recorded: this version is not run "
                           "again", always=True)
            else:
                self.ks.release(scope, line.key, token, reason=f"exit code {code}")
                self._tell(f"{where}: exit code {code}; released, the next run tries again",
                           always=True)
        except SETTLE_ERRORS as exc:
            if code == 0:  # not counted yet
                self.tally.failed += 1
            self._tell(f"{where}: exit code {code}, but the record could not be settled: "
                       f"{exc}", always=True)

    def _release(self, line: Line, token: str, reason: str) -> None:
        try:
            self.ks.release(self.args.scope, line.key, token, reason=reason)
        except KeyStoreError as exc:
            self._tell(f"line {line.number} (key {line.key}): could not be released ({exc}); "
                       "left to its lease", always=True)

    # --- what a person reads --------------------------------------------------------------

    def _unusable(self, number: int, reason: str) -> None:
        self.tally.unusable += 1
        self._tell(f"line {number}: {reason}; skipped", always=True)

    def _progress(self) -> None:
        now = time.monotonic()
        if now - self.last_progress >= self.args.progress:
            self.last_progress = now
            self._tell(f"progress: {self.tally.summary()}")

    def _tell(self, message: str, always: bool = False) -> None:
        if always or not self.args.quiet:
            say(f"keystore-client each: {message}")


def _catch_signals(handler: Any) -> dict:
    if threading.current_thread() is not threading.main_thread():
        return {}  # only the main thread may set handlers
    return {s: signal.signal(s, handler) for s in FORWARDED}
