"""The input of `keystore-client each`: JSON lines on stdin, each the claim of one record (its
key, version and payload), grouped into batches.

A field is named by its top-level name or, when no top-level field has that name, by a dotted
path into nested objects (`customer.id`). A key is a string (used exactly as it is) or an
integer (its decimal digits); a version is an integer or an RFC 3339 string. A line that is
not a JSON object, or lacks one of the fields asked for, is unusable: reported and skipped.
"""
from __future__ import annotations

import json
import queue
import threading
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any, Callable, Optional

from .._batch import BatchItem

MAX_KEY_CHARS = 512  # docs/api.md's limit on a key, in code points
READ_AHEAD = 2000  # lines read ahead of the batch being worked on (bounds the memory held)
IDLE_SECONDS = 0.5  # a batch is sent once the producer pauses this long, not only when full
POLL_SECONDS = 0.2  # how often a wait for input looks whether keystore-client was signalled
# A quarter of the service's default 1 MiB body limit, counted in line bytes: the claim's
# JSON escapes non-ASCII text, which can triple a line's size on the wire.
BATCH_BYTES = 256 * 1024
_EOF = object()
_MISSING = object()


class Unusable(ValueError):
    """Why a line cannot be claimed; its message is for the person reading stderr."""


@dataclass(frozen=True)
class Fields:
    key: str
    version: Optional[str] = None
    payload: Optional[str] = None  # None: the whole line is the payload


@dataclass(frozen=True)
class Line:
    number: int  # 1-based, counting every line read, blank ones too
    raw: bytes  # as read, without its line ending
    key: str
    version: Any = None
    payload: Any = None

    def item(self) -> BatchItem:
        return BatchItem(self.key, payload=self.payload, version=self.version)

    @property
    def stdin(self) -> bytes:
        """What the command reads: the line as read, ended by a newline."""
        return self.raw + b"\n"


def parse(number: int, raw: bytes, fields: Fields) -> Line:
    """The claim of one line; raises Unusable."""
    try:
        data = json.loads(raw, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Unusable(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise Unusable("not a JSON object")
    key = _key(_field(data, fields.key), fields.key)
    version = None
    if fields.version is not None:
        version = _field(data, fields.version)
        if version is _MISSING or version is None:
            raise Unusable(f"no version field {fields.version!r}")
        if isinstance(version, bool) or not isinstance(version, (int, str)):
            raise Unusable(f"the version field {fields.version!r} is {_kind(version)}; use "
                           "an integer or an RFC 3339 string")
    payload: Any = data
    if fields.payload is not None:
        payload = _field(data, fields.payload)
        if payload is _MISSING:
            raise Unusable(f"no payload field {fields.payload!r}")
    return Line(number, raw, key, version, payload)


def _field(data: dict, name: str) -> Any:
    if name in data:
        return data[name]
    value: Any = data
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _key(value: Any, name: str) -> str:
    if value is _MISSING or value is None:
        raise Unusable(f"no key field {name!r}")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise Unusable(f"the key field {name!r} is {_kind(value)}; use a string or an integer")
    if not 1 <= len(value) <= MAX_KEY_CHARS:
        raise Unusable(f"the key field {name!r} is empty or over {MAX_KEY_CHARS} characters")
    if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in value):
        raise Unusable(f"the key field {name!r} holds control characters")
    return value


def _kind(value: Any) -> str:
    return {bool: "a boolean", float: "a number with a fraction", dict: "an object",
            list: "an array"}.get(type(value), f"a {type(value).__name__}")


def _no_duplicates(pairs: list) -> dict:
    names = [k for k, _ in pairs]
    if len(set(names)) != len(names):
        raise ValueError("a field name appears twice")
    return dict(pairs)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class Reader:
    """Lines of a binary stream, read ahead on a daemon thread, so that a batch can go out
    when the producer pauses (a slow poller, `tail -f`) instead of waiting to be full."""

    def __init__(self, stream: IO[bytes]):
        self.stream = stream
        self.queue: queue.Queue = queue.Queue(READ_AHEAD)
        self.thread = threading.Thread(target=self._read, name="keystore-each-stdin",
                                       daemon=True)

    def start(self) -> Reader:
        self.thread.start()
        return self

    def _read(self) -> None:
        try:
            for raw in self.stream:
                self.queue.put(raw)
        except (OSError, ValueError):
            pass  # our input is gone: what was read is processed, as at its end
        finally:
            self.queue.put(_EOF)


def batches(reader: Reader, fields: Fields, size: int, unusable: Callable[[int, str], None],
            stopped: Callable[[], bool]) -> Iterator[list]:
    """Batches of at most `size` lines (and BATCH_BYTES), in input order. A key already in
    the batch starts the next one, so that it is claimed after the first line of that key
    has been worked on (a newer version then runs again, as it would one by one). Unusable
    lines go to `unusable(number, reason)`; blank lines are skipped."""
    batch: list = []
    keys: set = set()
    size_bytes = number = 0
    while not stopped():
        try:
            raw = reader.queue.get(timeout=IDLE_SECONDS if batch else POLL_SECONDS)
        except queue.Empty:
            if batch:
                yield batch
                batch, keys, size_bytes = [], set(), 0
            continue
        if raw is _EOF:
            break
        number += 1
        raw = raw.rstrip(b"\n").rstrip(b"\r")
        if not raw.strip():
            continue
        try:
            line = parse(number, raw, fields)
        except Unusable as exc:
            unusable(number, str(exc))
            continue
        if batch and (line.key in keys or size_bytes + len(raw) > BATCH_BYTES):
            yield batch
            batch, keys, size_bytes = [], set(), 0
        batch.append(line)
        keys.add(line.key)
        size_bytes += len(raw)
        if len(batch) >= size:
            yield batch
            batch, keys, size_bytes = [], set(), 0
    if batch and not stopped():
        yield batch
