"""What keystore-client writes for people: errors always, notes unless -q."""
from __future__ import annotations

import argparse
import sys


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def note(args: argparse.Namespace, message: str) -> None:
    """A note for a person reading the log; -q silences it."""
    if not args.quiet:
        say(f"keystore-client: {message}")
