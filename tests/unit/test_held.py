"""What a held delivery keeps (gateway/held.py): body and headers together at most 64 KiB of
stored JSON, whatever the bytes (issue 25, item 8)."""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from keystore_service.gateway.held import HELD_BYTES, held_kept


def stored(kept: str) -> int:
    return len(kept.encode("utf-8"))


def test_a_small_delivery_is_kept_whole():
    kept = json.loads(held_kept(b'{"id": 1}', [["X-A", "1"], ["X-B", "2"]]))
    assert kept == {"body": '{"id": 1}', "headers": [["X-A", "1"], ["X-B", "2"]]}


def test_bodies_that_grow_in_json_are_measured_as_stored():
    """60 KiB of control bytes is 360 KiB of JSON (\\u0001 each): not kept, said so."""
    kept = held_kept(b"\x01" * 60 * 1024, [["X-A", "1"]])
    assert stored(kept) <= HELD_BYTES
    assert json.loads(kept) == {"body": None, "headers": [["X-A", "1"]],
                                "too_large": 60 * 1024}


def test_headers_follow_the_body_as_far_as_they_fit():
    kept = json.loads(held_kept(b"b" * 60 * 1024, [["X-Big", "h" * 8000], ["X-Small", "s"]]))
    assert kept["body"] == "b" * 60 * 1024 and kept["headers"] == [["X-Small", "s"]]
    assert kept["headers_left_out"] == 1


@settings(max_examples=60, deadline=None)
@given(body=st.binary(max_size=80 * 1024),
       headers=st.lists(st.tuples(st.text(max_size=40), st.text(max_size=9000)), max_size=100))
def test_never_more_than_64_kib(body, headers):
    kept = held_kept(body, [list(pair) for pair in headers])
    assert stored(kept) <= HELD_BYTES
    parsed = json.loads(kept)
    assert len(parsed["headers"]) + parsed.get("headers_left_out", 0) == len(headers)
