"""domain/pointers.py: RFC 6901 as a check's pointers and a send's resource_id_pointer read
an answer. The RFC's own examples (section 5), then the edges a destination's answer or an
operator's pointer can bring: escapes, indexes, "-", huge numbers, non-ASCII."""
from __future__ import annotations

import json

import pytest

from keystore_service.domain.pointers import resolve, scalar_text, tokens, valid

RFC = json.loads(r'''{"foo": ["bar", "baz"], "": 0, "a/b": 1, "c%d": 2, "e^f": 3, "g|h": 4,
                      "i\\j": 5, "k\"l": 6, " ": 7, "m~n": 8}''')


@pytest.mark.parametrize("pointer, value", [
    ("", RFC), ("/foo", ["bar", "baz"]), ("/foo/0", "bar"), ("/", 0), ("/a~1b", 1),
    ("/c%d", 2), ("/e^f", 3), ("/g|h", 4), ("/i\\j", 5), ("/k\"l", 6), ("/ ", 7),
    ("/m~0n", 8)])
def test_the_rfcs_examples(pointer, value):
    assert resolve(RFC, pointer) == (True, value)


def test_escapes_are_undone_tilde_one_first():
    doc = {"~1": "tilde-one", "/": "slash", "~": "tilde", "a~/b": "both"}
    assert resolve(doc, "/~01") == (True, "tilde-one")  # ~01 is "~1", not "/"
    assert resolve(doc, "/~1") == (True, "slash")
    assert resolve(doc, "/~0") == (True, "tilde")
    assert resolve(doc, "/a~0~1b") == (True, "both")
    assert tokens("/~01/~10") == ["~1", "/0"]


@pytest.mark.parametrize("pointer", ["foo", "#/foo", "/~", "/~2", "/a~", "/~a", "/x/~3y"])
def test_a_malformed_pointer_names_nothing(pointer):
    assert not valid(pointer)
    assert resolve({"foo": 1, "~": 2, "a~": 3}, pointer) == (False, None)


def test_array_indexes():
    doc = {"items": [{"id": "a"}, {"id": "b"}], "empty": []}
    assert resolve(doc, "/items/1/id") == (True, "b")
    assert resolve(doc, "/items/2") == (False, None)  # past the end
    assert resolve(doc, "/items/-") == (False, None)  # the element after the last
    assert resolve(doc, "/items/01") == (False, None)  # a leading zero is no index
    assert resolve(doc, "/items/+1") == (False, None)
    assert resolve(doc, "/items/-1") == (False, None)
    assert resolve(doc, "/items/ 1") == (False, None)
    assert resolve(doc, "/items/") == (False, None)
    assert resolve(doc, "/empty/0") == (False, None)
    assert resolve(doc, "/empty") == (True, [])


def test_huge_and_foreign_digits_are_no_index():
    doc = {"list": ["only"]}
    assert resolve(doc, "/list/" + "9" * 30) == (False, None)
    assert resolve(doc, "/list/" + "1" * 5000) == (False, None)  # int() would refuse it
    assert resolve(doc, "/list/\u0660") == (False, None)  # ARABIC-INDIC DIGIT ZERO
    assert resolve(doc, "/list/\uff10") == (False, None)  # FULLWIDTH DIGIT ZERO


def test_a_token_into_a_scalar_names_nothing():
    doc = {"s": "text", "n": 5, "b": True, "z": None}
    for p in ("/s/0", "/n/0", "/b/x", "/z/x", "/s/length"):
        assert resolve(doc, p) == (False, None)
    assert resolve(doc, "/z") == (True, None)  # null exists


def test_non_ascii_names_and_an_object_key_that_looks_like_an_index():
    doc = {"東京": {"ü": "x"}, "0": "zero", "items": {"1": "one"}}
    assert resolve(doc, "/東京/ü") == (True, "x")
    assert resolve(doc, "/0") == (True, "zero")
    assert resolve(doc, "/items/1") == (True, "one")  # an object's name, not an index
    assert resolve(doc, "/東京/u") == (False, None)  # no normalisation


def test_scalar_text_is_a_resource_ids_spelling():
    assert scalar_text("ch_1") == "ch_1"
    assert scalar_text(42) == "42"
    assert scalar_text(10 ** 30) == "1" + "0" * 30
    assert scalar_text(1.5) == "1.5"
    assert scalar_text(True) == "true"
    for nothing in (None, "", {}, [], ["a"], {"id": 1}, "x" * 1025):
        assert scalar_text(nothing) is None
    assert scalar_text("東京") == "東京"
