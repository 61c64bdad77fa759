"""`keystore-client lookup`: print a key's record as JSON (what happened to this run?)."""
from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from .._client import KeyStore
from .._exceptions import Expired, NotFound
from . import exits
from .numbers import whole
from .output import say


def add_parser(sub: Any) -> None:
    p = sub.add_parser("lookup", help="print the record of a key as JSON",
                       description="Print the record of (scope, key) as JSON; exit 66 if there "
                                   "is none (or only an expired one).")
    p.add_argument("--scope", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--wait", type=whole(1, 30), metavar="SECONDS",
                   help="wait up to 1-30 s while the record is in progress")
    p.set_defaults(handler=main, needs_keystore=True)


def main(args: argparse.Namespace, ks: KeyStore) -> int:
    try:
        record = ks.lookup(args.scope, args.key, wait=args.wait)
    except (NotFound, Expired) as exc:
        say(f"keystore-client lookup: {exc.message}")
        return exits.NO_RECORD
    print(json.dumps(dataclasses.asdict(record), default=_iso, ensure_ascii=False, indent=2))
    return 0


def _iso(value: Any) -> str:
    return value.isoformat().replace("+00:00", "Z")
