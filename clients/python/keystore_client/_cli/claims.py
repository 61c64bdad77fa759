"""Claiming the lines of one `each` batch, and what to tell a person about a refused line."""
from __future__ import annotations

import argparse

from .._client import KeyStore
from .._exceptions import APIError, InvalidRequest, PayloadTooLarge


def claim_lines(ks: KeyStore, args: argparse.Namespace, lines: list) -> list:
    """A BatchResult per line, in order, or the error of a line that the service refused on
    its own. A whole batch refused for its items (400, 413) wrote nothing, so its halves are
    sent again until each refused line stands alone; the others are claimed as usual. A
    refusal of the request itself (its scope, its options) is raised."""
    try:
        return ks.claim_batch(args.scope, [line.item() for line in lines],
                              ttl_seconds=args.ttl_seconds, lease_seconds=args.lease_seconds)
    except (InvalidRequest, PayloadTooLarge) as exc:
        if not _about_items(exc):
            raise
        if len(lines) == 1:
            return [exc]
        half = len(lines) // 2
        return claim_lines(ks, args, lines[:half]) + claim_lines(ks, args, lines[half:])


def _about_items(exc: APIError) -> bool:
    if isinstance(exc, PayloadTooLarge):
        return True
    details = exc.details or {}
    named = [e.get("field") for e in details.get("errors", []) if isinstance(e, dict)]
    named += [details["field"]] if "field" in details else []
    return all(isinstance(f, str) and f.startswith("items") for f in named)


def reason(exc: APIError) -> str:
    """The service's reason for refusing one item, without the item's index."""
    errors = (exc.details or {}).get("errors")
    if isinstance(errors, list) and errors:
        return "; ".join(f"{str(e.get('field', '')).split('.', 2)[-1]}: "
                         f"{str(e.get('message')).replace('Value error, ', '')}"
                         for e in errors if isinstance(e, dict))
    return exc.message
