"""`keystore-client derive-key`: print the key that `derive_key(*parts)` gives, for shells.

    KEY=$(keystore-client derive-key "$PROJECT" "$WEEK")

Parts are strings here: NFC-normalised, stripped, joined with "|" after escaping "%", "|" and
control characters (see the Python client's derive_key for the whole rule).
"""
from __future__ import annotations

import argparse
from typing import Any

from .._keys import derive_key
from . import exits
from .output import say


def add_parser(sub: Any) -> None:
    p = sub.add_parser("derive-key", help="print a stable key made from natural identifiers",
                       description=__doc__.split("\n\n", 1)[0].split(": ", 1)[1])
    p.add_argument("parts", nargs="+", metavar="PART")
    p.set_defaults(handler=main, needs_keystore=False)


def main(args: argparse.Namespace, _ks: Any) -> int:
    try:
        print(derive_key(*args.parts))
    except ValueError as exc:
        say(f"keystore-client derive-key: {exc}")
        return exits.USAGE
    return 0
