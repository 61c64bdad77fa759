"""Log lines that a request cannot forge or fill: one place formats every line.

- Everything in a message that came from a request (a path, a header, a key) is escaped: a
  URL-encoded newline in an unauthenticated path wrote a forged line into the access log
  (issue 13, item 8). Control, format and separator characters become `\\xNN` / `\\uNNNN`,
  so one event is one line and looks like what it is.
- An ingest id is a credential (for an unsigned source the only one): a path under
  /hooks/ is logged with at most the id's first 4 characters (issue 25, item 11).
- An exception is logged as its class and the code lines it passed through, never its
  message: `invalid literal for int() with base 10: '²'` carried request input into the
  error log (item 14). The request id in the line ties it to the request.
"""
from __future__ import annotations

import logging
import re
import sys
import traceback
import uuid
from types import TracebackType
from typing import Optional

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_MAX_ID = 64
_HOOKS = re.compile("/hooks/", re.IGNORECASE | re.ASCII)
SHOWN_INGEST_CHARS = 4  # enough to tell sources apart in a log, far too few to guess the rest


def _escape_table() -> dict[int, str]:
    table = {}
    for code in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, 0x200B, 0x200E, 0x200F,
                 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069,
                 0xFEFF]:
        table[code] = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return table


_TABLE = _escape_table()


def escape(text: str) -> str:
    """`text` on one line: control, line-separator and direction characters escaped."""
    if text.isprintable():
        return text
    return "".join(_TABLE.get(ord(ch), ch if ch.isprintable() or ch == " " else
                              f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else
                              f"\\U{ord(ch):08x}") for ch in text)


def path_shown(path: str) -> str:
    """`path` as a log line may show it: from the first `/hooks/` on (in any case, wherever it
    is, so `//hooks/<id>` and `/HOOKS/<id>/` too), at most 4 characters of what follows, then
    `…`; the rest of the id and anything after it are left out."""
    found = _HOOKS.search(path)
    if found is None:
        return path
    start = found.end()
    return path[:start] + path[start:start + SHOWN_INGEST_CHARS] + "\u2026" \
        if len(path) > start else path


def pre_request(worker, req) -> None:
    """gunicorn's pre_request hook: its own DEBUG line of each request, with the path as
    path_shown() gives it (gunicorn's default logs the whole path, ingest id and all)."""
    worker.log.debug("%s %s", req.method, path_shown(req.path or ""))


def describe(exc_type: Optional[type], value: Optional[BaseException],
             tb: Optional[TracebackType]) -> str:
    """The exception's class and frames (file, line, function, code), causes included,
    without any exception's message."""
    lines: list[str] = []
    te: Optional[traceback.TracebackException] = traceback.TracebackException(
        exc_type or type(value), value, tb, capture_locals=False, compact=True) \
        if exc_type or value else None
    chain = []
    while te is not None:
        chain.append(te)
        te = te.__cause__ or (None if te.__suppress_context__ else te.__context__)
    for n, te in enumerate(reversed(chain)):
        if n:
            lines.append("The above exception led to the next one:")
        lines.append("Traceback (most recent call last):")
        lines.extend(line.rstrip("\n") for line in te.stack.format())
        lines.append(f"{te.exc_type.__module__}.{te.exc_type.__qualname__} "
                     "(message not logged: it may carry request input)")
    return "\n".join(lines)


class SafeFormatter(logging.Formatter):
    """Escapes the message; formats exceptions without their messages."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging API)
        record.message = escape(record.message)
        return super().formatMessage(record)

    def formatException(self, ei) -> str:  # noqa: N802 (logging API)
        return describe(*ei)

    def formatStack(self, stack_info: str) -> str:  # noqa: N802 (logging API)
        return stack_info


def configure(level: str = "INFO") -> None:
    """Every logger of the process writes through one SafeFormatter on stderr (like
    logging.basicConfig, nothing changes when the root logger has handlers already, as
    under a test runner or a host application)."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(SafeFormatter(FORMAT))
    root.addHandler(handler)
    root.setLevel(level)


def request_id(given: Optional[str]) -> str:
    """The caller's X-Request-Id when it is a short printable ASCII word, else a new one."""
    if given and len(given) <= _MAX_ID and given.isascii() and given.isprintable() \
            and " " not in given:
        return given
    return uuid.uuid4().hex
