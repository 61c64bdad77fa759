"""One formatter for every log line: request input escaped, exceptions without messages."""
from __future__ import annotations

import io
import logging

import pytest

from keystore_service import logs


@pytest.mark.parametrize("raw,shown", [
    ("/v1/x\n2026 INFO forged", "/v1/x\\x0a2026 INFO forged"),
    ("a\rb", "a\\x0db"), ("a\u2028b\u2029", "a\\u2028b\\u2029"), ("\x1b[31m", "\\x1b[31m"),
    ("\x85", "\\x85"), ("rtl\u202eevil", "rtl\\u202eevil"), ("é ü 日本 ok", "é ü 日本 ok"),
])
def test_escape_keeps_one_event_on_one_line(raw, shown):
    assert logs.escape(raw) == shown


def logged(fn) -> str:
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(logs.SafeFormatter(logs.FORMAT))
    logger = logging.getLogger("test-logs")
    logger.handlers[:] = [handler]
    logger.propagate = False
    fn(logger)
    return buf.getvalue()


def test_an_exception_is_logged_without_its_message_causes_included():
    given = "²-INPUT-" + "s3cr3t"  # as request input would be: not in any source line

    def fail(logger):
        try:
            try:
                int(given)
            except ValueError as exc:
                raise KeyError(given.replace("INPUT", "CAUSE")) from exc
        except KeyError as exc:
            logger.error("internal error %s on %s", type(exc).__name__, "/ui/\npath",
                         exc_info=exc)
    text = logged(fail)
    assert "s3cr3t" not in text and "²" not in text
    assert "builtins.ValueError (message not logged" in text
    assert "builtins.KeyError (message not logged" in text
    assert "int(given)" in text  # the code line is shown, the value is not
    assert "/ui/\\x0apath" in text and "in fail" in text


@pytest.mark.parametrize("given,kept", [
    ("abc-123", True), ("a" * 64, True), ("a" * 65, False), ("a b", False), ("a\nb", False),
    ("é", False), ("", False), (None, False),
])
def test_request_ids_from_callers_are_short_printable_words(given, kept):
    rid = logs.request_id(given)
    assert (rid == given) is kept and rid.isascii() and len(rid) <= 64


@pytest.mark.parametrize("path,shown", [
    ("/hooks/lv7tQG_iM-umZSpb1AnF8tZ_qfhOEF5s6-oyzKijDrw", "/hooks/lv7t\u2026"),
    ("/hooks/lv7tQG_iM/x", "/hooks/lv7t\u2026"), ("//HOOKS/lv7tQG_iM", "//HOOKS/lv7t\u2026"),
    ("/x/hooks/abcdef", "/x/hooks/abcd\u2026"), ("/hooks/ab", "/hooks/ab\u2026"),
    ("/hooks/", "/hooks/"), ("/v1/claim", "/v1/claim"), ("/ui/hooks", "/ui/hooks"),
    ("/\u0130\u0130/hooks/abcdef", "/\u0130\u0130/hooks/abcd\u2026"),  # lower() grows İ
])
def test_an_ingest_id_in_a_path_shows_at_most_4_characters(path, shown):
    """Issue 25, item 11: an ingest id is a credential (an unsigned source's only one)."""
    assert logs.path_shown(path) == shown
