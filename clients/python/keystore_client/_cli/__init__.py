"""The `keystore-client` command: one sub-command per module, dispatched from one table.

    keystore-client [--url URL] [--token TOKEN] [--timeout S] [-q] COMMAND ...

The URL and token come from --url / --token or KEYSTORE_URL / KEYSTORE_TOKEN (prefer the
environment for the token: arguments are visible in `ps`). Each sub-command module offers
`add_parser(subparsers)`, whose parser sets `handler(args, keystore) -> exit code` and
`needs_keystore`; a new sub-command is one module and one line in COMMANDS.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Optional

from .._client import DEFAULT_TIMEOUT, KeyStore, __version__
from .._exceptions import KeyStoreError
from . import each, exits, keys, lookup, run
from .numbers import seconds
from .output import say

COMMANDS = (run, each, lookup, keys)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse exits 2; the documented usage code is 64
        self.print_usage(sys.stderr)
        self.exit(exits.USAGE, f"{self.prog}: error: {message}\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="keystore-client",
                description="Exactly-once runs of commands, backed by an Idempotency Key Store.")
    p.add_argument("--url", default=os.environ.get("KEYSTORE_URL"),
                   help="the key store's base URL (default: $KEYSTORE_URL)")
    p.add_argument("--token", default=os.environ.get("KEYSTORE_TOKEN"),
                   help="a bearer token (default: $KEYSTORE_TOKEN; prefer the variable)")
    p.add_argument("--timeout", type=seconds(0.1, 3600), default=DEFAULT_TIMEOUT,
                   help="seconds per HTTP request (default: %(default)s)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no notes on stderr (errors are still printed)")
    p.add_argument("--version", action="version", version=f"keystore-client {__version__}")
    sub = p.add_subparsers(dest="command_name", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for module in COMMANDS:
        module.add_parser(sub)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parser().parse_args(argv)
    ks = None
    if args.needs_keystore:
        if not args.url or not args.token:
            say("keystore-client: set KEYSTORE_URL and KEYSTORE_TOKEN (or --url and --token)")
            return exits.CONFIG
        try:
            ks = KeyStore(args.url, args.token, timeout=args.timeout)
        except ValueError as exc:
            say(f"keystore-client: {exc}")
            return exits.CONFIG
    try:
        return args.handler(args, ks)
    except KeyStoreError as exc:
        say(f"keystore-client: {exc}")
        return exits.for_error(exc)
    finally:
        if ks is not None:
            ks.close()


def entry_point() -> None:
    sys.exit(main())
