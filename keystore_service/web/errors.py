"""Every error the service answers, rendered in one place: docs/api.md's JSON envelope for
the API (install_app: the app-wide handlers), and for the operators' page a page (install_page:
never a stack trace, never JSON) with a calm sentence, the status, and a way back.

The one module that both web/api/ and web/ui/ may import, and that imports from both
(tests/unit/test_layering.py)."""
from __future__ import annotations

import logging
from typing import Any, Optional

from flask import Blueprint, Flask, Response, current_app, render_template, request, url_for
from werkzeug.exceptions import HTTPException

from keystore_service import errors, logs
from keystore_service.web.api.render import ReviewOf, current_request_id, record_json, respond
from keystore_service.web.context import keystore
from keystore_service.web.ui.ui_forms import FormError, record_ref

log = logging.getLogger("keystore")
ui_log = logging.getLogger("keystore.ui")
HEADERS = {
    # Everything the page uses is served by the service itself; no script runs at all.
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",  # record pages carry scope and key in their address
}
TITLES = {400: "That could not be used", 401: "Sign in first", 403: "Not allowed",
          404: "Not found", 405: "Not available here", 409: "Not done",
          413: "Too large", 500: "Something went wrong on our side",
          503: "The database did not answer"}
KNOWN = {
    errors.AlreadyCompleted: "The record is already finished, so it cannot be marked again. "
    "A fingerprint mismatch on it can still be dismissed; to let a corrected resend through, "
    "expire the record.",
    errors.InProgress: "A live lease holds this record: an attempt is running right now. "
    "Wait until it completes or its lease runs out, then try again.",
    errors.Expired: "The record has expired: it counts as absent, and the next claim of this "
    "key starts afresh.",
}


# --- the API's JSON envelope ----------------------------------------------------------------

def error_json(exc: errors.KeystoreError) -> dict:
    return {"code": exc.code, "message": exc.message, "details": exc.details}


def error_response(exc: errors.KeystoreError, review_of: Optional[ReviewOf] = None) -> Response:
    body: dict[str, Any] = {"error": error_json(exc)}
    if exc.outcome is not None:
        body["outcome"] = exc.outcome
    if exc.record is not None:
        body["record"] = record_json(exc.record, review_of)
    headers = dict(exc.headers)
    if exc.status == 503 and "Retry-After" not in headers:
        headers["Retry-After"] = "1"
    return respond(body, exc.status, exc.record, headers)


def install_app(app: Flask) -> None:
    """The app-wide handlers: every error outside the page as the JSON envelope (an address
    under /ui that no page answers as a page)."""
    @app.errorhandler(errors.KeystoreError)
    def _keystore_error(exc: errors.KeystoreError):
        if isinstance(exc, errors.Unavailable):
            if getattr(exc, "from_database", True):  # not a source's keys (sealing.py)
                keystore().metrics.database_error()
            review_of = None  # the database is why we are here: do not ask it again
        else:
            review_of = keystore().service.open_review
        return error_response(exc, review_of)

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):
        if request.path == "/ui" or request.path.startswith("/ui/"):
            return http_error_page(exc)  # an address under /ui that no page answers
        mapped = {404: errors.NotFound("no such endpoint"),
                  405: errors.MethodNotAllowed(),
                  413: errors.PayloadTooLarge(
                      details={"limit_bytes": app.config["MAX_CONTENT_LENGTH"]})}
        err = mapped.get(exc.code or 500)
        if err is None:
            err = (errors.InvalidRequest(exc.description or "bad request")
                   if (exc.code or 500) < 500 else errors.InternalError())
        resp = error_response(err)
        if exc.code == 405:
            resp.headers["Allow"] = ", ".join(exc.valid_methods or [])
        return resp

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):
        # The class and the code lines only (logs.SafeFormatter): never the exception's
        # message, which may carry request input; the request id ties the line to the answer.
        rid = current_request_id()
        log.error("internal error %s on %s %s (request %s)", type(exc).__name__,
                  request.method, logs.path_shown(request.path), rid, exc_info=exc)
        resp = error_response(errors.InternalError(details={"request_id": rid}))
        resp.headers["X-Request-Id"] = rid
        return resp


# --- the operators' page ------------------------------------------------------------------

class CsrfRefused(Exception):
    """A POST without this session's CSRF token."""


def error_page(status: int, message: str, back: Optional[str] = None) -> Response:
    """An error as a page (also for /ui addresses that match no view)."""
    resp = current_app.make_response((render_template(
        "ui/error.html", status=status, title=TITLES.get(status, "Not done"), message=message,
        back=back), status))
    resp.headers.update(HEADERS)
    resp.headers["Cache-Control"] = "no-store"
    return resp


def http_error_page(exc: HTTPException) -> Response:
    status = exc.code or 500
    message = {404: "There is no page at this address.",
               405: "This address does not take that kind of request.",
               413: "The form sent more than this service accepts."}.get(
        status, "The request could not be used.")
    return error_page(status, message)


def _back_to_record() -> Optional[str]:
    try:
        fields = request.form if request.method == "POST" else request.args
        scope, key = record_ref(fields)
    except (FormError, UnicodeDecodeError):  # the latter: a query that is not UTF-8
        return None
    return url_for("ui.record", scope=scope, key=key)


def _csrf_refused(_exc: CsrfRefused) -> Response:
    return error_page(400, "This form was refused because it did not carry this page's "
                           "security token. Nothing was changed. Open the page again and "
                           "use its form.", url_for("ui.queue"))


def _form_error(exc: FormError) -> Response:
    text = str(exc)
    message = (f"Nothing was changed: {text}." if request.method == "POST"
               else f"{text[:1].upper()}{text[1:]}.")
    return error_page(400, message, _back_to_record())


def _page_keystore_error(exc: errors.KeystoreError) -> Response:
    if isinstance(exc, errors.Unavailable):
        keystore().metrics.database_error()
        return error_page(503, "Nothing was changed. Try again in a moment.")
    message = KNOWN.get(type(exc), exc.message[:1].upper() + exc.message[1:])
    return error_page(exc.status, message, _back_to_record())


def _page_unexpected(exc: Exception) -> Response:
    rid = current_request_id()
    ui_log.error("internal error %s on %s %s (request %s)", type(exc).__name__, request.method,
              request.path, rid, exc_info=exc)
    return error_page(500, "The page could not be shown. The error was logged; nothing "
                           "about it is shown here.")


def install_page(bp: Blueprint) -> None:
    """Render every error raised in the page's views as a page."""
    bp.register_error_handler(CsrfRefused, _csrf_refused)
    bp.register_error_handler(FormError, _form_error)
    bp.register_error_handler(errors.KeystoreError, _page_keystore_error)
    bp.register_error_handler(HTTPException, http_error_page)
    bp.register_error_handler(Exception, _page_unexpected)
