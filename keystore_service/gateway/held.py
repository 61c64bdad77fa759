"""What a held delivery (a known event id, another body) keeps on its review for a person,
pure: its body and headers together, at most HELD_BYTES (issue 25, item 8: a changed body
sent with 90 headers of 8 KB kept 721 KB on its review, and ten of them made one page of
GET /v1/reviews 7.2 MB).

    {"body": text | null, "headers": [[name, value], ...],
     "too_large": n            when the body (n bytes) did not fit: its text is not kept,
     "headers_left_out": k     when k headers did not fit in what the body left}

The body comes first (it is what a person compares); the headers follow in their order as
far as they fit, each whole or not at all.
"""
from __future__ import annotations

import json

HELD_BYTES = 64 * 1024  # docs/webhooks/README.md's bound on a held delivery's body and headers
_FRAME = 128  # the kept object's own keys, brackets and counts, generously


def _size(value) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def held_kept(body: bytes, headers: list[list[str]]) -> str:
    """The review's `kept` (JSON text, at most HELD_BYTES bytes of UTF-8) of a delivery."""
    text = body.decode("utf-8", "replace")
    room = HELD_BYTES - _FRAME
    body_size = _size(text) if len(body) <= HELD_BYTES else HELD_BYTES + 1
    held: dict = {"body": text if body_size <= room else None, "headers": []}
    if held["body"] is None:
        held["too_large"] = len(body)
    else:
        room -= body_size
    left_out = 0
    for pair in headers:
        size = _size(pair) + 2  # and its ", "
        if size > room:
            left_out += 1
            continue
        room -= size
        held["headers"].append(pair)
    if left_out:
        held["headers_left_out"] = left_out
    return json.dumps(held, ensure_ascii=False)
