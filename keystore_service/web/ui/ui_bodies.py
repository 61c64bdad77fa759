"""Webhook bodies as the operators' page shows them: pretty-printed JSON when the body parses,
its text otherwise, every invisible or control character made visible, cut to a size a page
can carry; and two bodies side by side, each line marked that the other lacks.

Bodies come from whoever holds a source's ingest URL and secret: nothing here trusts them.
The page escapes what this returns (Jinja's autoescape); this module only bounds the work
and makes hidden differences visible (a zero-width space or a right-to-left override would
otherwise look the same as nothing at all).
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Optional, Union

SHOWN_CHARS = 64 * 1024  # of a body on the page: a held delivery's bound (held.HELD_BYTES)
PARSED_BYTES = 1024 * 1024  # larger bodies are shown as text, not parsed: the default
#                             request-body limit (KEYSTORE_MAX_BODY_BYTES may be up to 64 MiB)


@dataclass(frozen=True, slots=True)
class Body:
    text: str  # what the page shows (already cut)
    is_json: bool
    size: int  # of the body as it came, in bytes
    cut: bool  # the text was cut to SHOWN_CHARS


@dataclass(frozen=True, slots=True)
class Line:
    text: str
    changed: bool


def shown(body: Union[bytes, str, None]) -> Optional[Body]:
    """The body for a person; None when there is none. JSON is indented with its keys sorted
    (so two bodies line up by field); anything else is its UTF-8 text (invalid bytes as
    U+FFFD)."""
    if body is None:
        return None
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    text = raw.decode("utf-8", "replace")
    pretty = _pretty(text) if len(raw) <= PARSED_BYTES else None
    out = visible(pretty if pretty is not None else text)
    return Body(out[:SHOWN_CHARS], pretty is not None, len(raw), len(out) > SHOWN_CHARS)


def _pretty(text: str) -> Optional[str]:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=True)
    except (ValueError, RecursionError):  # not JSON; or nested deeper than Python recurses
        return None


def visible(text: str) -> str:
    """`text` with every character that prints as nothing or moves the text (controls but
    line feed and tab, format characters such as U+200B and U+202E, separators other than
    the space) written as \\uXXXX."""
    return "\n".join(line if line.isprintable() else "".join(
        c if c.isprintable() or c == "\t" else f"\\u{ord(c):04x}" for c in line)
        for line in text.split("\n"))


def side_by_side(left: Body, right: Body) -> tuple[list[Line], list[Line]]:
    """Both bodies' lines, each marked when the other side lacks it (counted: a line twice
    on one side and once on the other is marked once). Linear, unlike a diff (difflib takes
    seconds on lines a sender chose to make it slow); with sorted keys a changed field is a
    line of its own on each side, which is what a person looks for."""
    a, b = left.text.split("\n"), right.text.split("\n")
    return _marked(a, Counter(map(_same, b))), _marked(b, Counter(map(_same, a)))


def _same(line: str) -> str:
    """What two lines must share to count as the same: all but a JSON list's trailing comma
    (a field that is last on one side and not on the other is not a change)."""
    return line.rstrip().removesuffix(",")


def _marked(lines: list[str], other: Counter) -> list[Line]:
    out = []
    for text in lines:
        key = _same(text)
        found = other[key] > 0
        if found:
            other[key] -= 1
        out.append(Line(text, not found))
    return out


PATHS_SHOWN = 50  # differing JSON paths listed above two payloads; the rest are counted


def differing_paths(a, b, limit: int = PATHS_SHOWN) -> tuple[list[str], int]:
    """The JSON pointers (RFC 6901) where two values differ, in document order: the first
    `limit` of them, and how many there are in all (bounded work: payloads are at most 64
    KiB, and a walk stops descending once it has counted 10,000 differences)."""
    found: list[str] = []
    total = [0]

    def walk(x, y, path: str) -> None:
        if total[0] >= 10_000:
            return
        if isinstance(x, dict) and isinstance(y, dict):
            for k in sorted(set(x) | set(y)):
                step = path + "/" + k.replace("~", "~0").replace("/", "~1")
                if k not in x or k not in y:
                    note(step)
                else:
                    walk(x[k], y[k], step)
        elif isinstance(x, list) and isinstance(y, list):
            for i in range(max(len(x), len(y))):
                if i >= len(x) or i >= len(y):
                    note(f"{path}/{i}")
                else:
                    walk(x[i], y[i], f"{path}/{i}")
        elif x != y or type(x) is not type(y):
            note(path or "/")

    def note(path: str) -> None:
        total[0] += 1
        if len(found) < limit:
            found.append(path)
    walk(a, b, "")
    return found, total[0]


def compare_payloads(kept: Optional[dict]) -> Optional[dict]:
    """A mismatch's kept payloads (operations.kept) as the page shows them: both side by
    side, lines marked, and the JSON paths that differ; None without both."""
    if not kept or "original" not in kept or kept.get("original") is None \
            or kept.get("refused") is None:
        return None
    left = shown(json.dumps(kept["original"]))
    right = shown(json.dumps(kept["refused"]))
    paths, total = differing_paths(kept["original"], kept["refused"])
    return {"original": left, "refused": right, "lines": side_by_side(left, right),
            "paths": paths, "more": total - len(paths)}
