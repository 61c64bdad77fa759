"""derive_key: the same intent always gives the same key, different intents never share one."""
from __future__ import annotations

import unicodedata
import uuid
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from keystore_client import derive_key


def test_readable_keys_from_natural_identifiers():
    assert derive_key("acme", "2026-W48") == "acme|2026-W48"
    assert derive_key("acme", date(2026, 11, 30), 42) == "acme|2026-11-30|42"
    assert derive_key(uuid.UUID("6F9619FF-8B86-D011-B42D-00C04FC964FF")) == \
        "6f9619ff-8b86-d011-b42d-00c04fc964ff"


def test_the_same_intent_written_differently_gives_the_same_key():
    composed, decomposed = "caf\u00e9", unicodedata.normalize("NFD", "caf\u00e9")
    assert composed != decomposed and derive_key(composed) == derive_key(decomposed)
    assert derive_key("  evt_1  ") == derive_key("evt_1")
    assert derive_key(Decimal("12.50")) == derive_key(Decimal("12.5")) == "12.5"
    assert derive_key(Decimal("1E+3")) == "1000"
    berlin = timezone(timedelta(hours=1))
    assert derive_key(datetime(2026, 11, 30, 15, 5, tzinfo=berlin)) == \
        derive_key(datetime(2026, 11, 30, 14, 5, tzinfo=UTC)) == "2026-11-30T14:05:00Z"


def test_different_intents_never_share_a_key():
    assert derive_key("a|b", "c") != derive_key("a", "b|c")
    assert derive_key("a%7Cb") != derive_key("a|b")
    assert derive_key("urn:x:1") == "urn:x:1"  # colons inside ids stay readable
    assert derive_key("Evt_1") != derive_key("evt_1")  # ids are case-sensitive
    assert derive_key("1", "2") != derive_key("12") != derive_key(1, 2)
    assert derive_key("x\ny") == "x%0Ay"  # no control characters reach the key store


def test_long_keys_are_hashed_within_the_contract_limit():
    long_key = derive_key("x" * 600)
    assert long_key.startswith("%sha256:") and len(long_key) == 8 + 64
    assert long_key == derive_key("x" * 600) != derive_key("x" * 601)
    assert len(derive_key("y" * 512)) == 512  # at the limit: kept readable


@pytest.mark.parametrize("part", [None, "", "   ", 1.5, True, datetime(2026, 1, 1), b"raw",
                                  Decimal("NaN")])
def test_parts_that_would_merge_intents_are_refused(part):
    with pytest.raises((ValueError, TypeError)):
        derive_key("acme", part)
    with pytest.raises(ValueError):
        derive_key()
