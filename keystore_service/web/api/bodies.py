"""Request bodies at the edge of the limit, the same for every path (API, page, gateway).

- A chunked body (no Content-Length) was cut at the limit and the rest ignored, so a 2.5 MiB
  body whose first MiB was a valid claim got 201 (issue 13, item 5a): it is read here up to
  the limit + 1 byte, refused whole when longer, and handed on with its length known.
- A refused oversize body is read and discarded (up to a bound, in a bounded time) before
  the 413 is sent: otherwise the server closes with the client's bytes unread, the kernel
  resets the connection, and a keep-alive client sees `connection reset` instead of the 413
  (item 5b).
"""
from __future__ import annotations

import io
import time
from typing import Any

from keystore_service.errors import PayloadTooLarge

# What a refused body may cost us to read and throw away: enough for any client that made an
# honest mistake (a payload a few times the limit), not for one that streams forever.
DRAIN_BYTES = 16 * 1024 * 1024
DRAIN_SECONDS = 10.0
_CHUNK = 64 * 1024


def _chunked(environ: dict) -> bool:
    return not environ.get("CONTENT_LENGTH") and "wsgi.input_terminated" in environ


def buffer_chunked(environ: dict, limit: int) -> None:
    """Read a chunked body whole (at most `limit` bytes, else PayloadTooLarge) and hand it
    on as if it had come with a Content-Length."""
    if not _chunked(environ):
        return
    stream = environ["wsgi.input"]
    parts, size = [], 0
    while size <= limit:
        part = stream.read(min(_CHUNK, limit + 1 - size))
        if not part:
            break
        parts.append(part)
        size += len(part)
    if size > limit:
        raise PayloadTooLarge(details={"limit_bytes": limit})
    data = b"".join(parts)
    environ["wsgi.input"] = io.BytesIO(data)
    environ["CONTENT_LENGTH"] = str(len(data))
    environ.pop("wsgi.input_terminated", None)
    environ.pop("HTTP_TRANSFER_ENCODING", None)


def drain(environ: dict) -> bool:
    """Read and discard what is left of the request body; False when more than DRAIN_BYTES
    are left or DRAIN_SECONDS pass first (the connection must then close)."""
    length = environ.get("CONTENT_LENGTH") or ""
    if length and not (length.isascii() and length.isdigit() and int(length) <= DRAIN_BYTES):
        return False
    stream = environ.get("wsgi.input")
    sock: Any = environ.get("gunicorn.socket")
    previous = sock.gettimeout() if sock is not None else None
    deadline, drained = time.monotonic() + DRAIN_SECONDS, 0
    try:
        while stream is not None:
            left = deadline - time.monotonic()
            if left <= 0 or drained > DRAIN_BYTES:
                return False
            if sock is not None:
                sock.settimeout(left)
            part = stream.read(_CHUNK)
            if not part:
                return True
            drained += len(part)
        return True
    except (OSError, ValueError):
        return False
    finally:
        if sock is not None:
            try:
                sock.settimeout(previous)
            except OSError:
                pass
