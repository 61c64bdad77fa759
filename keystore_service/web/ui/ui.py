"""The operators' page under /ui/: server-rendered, works without JavaScript.

An entry point like api.py: each view parses, calls operations / service / reports /
oversight, and renders. Every page is limited to the signed-in operator's tenant. Every POST
carries the session's CSRF token (checked before any view runs). Errors are pages, never
stack traces; tokens and lease-token hashes are never shown.
"""
from __future__ import annotations

import logging
from functools import wraps
from typing import Optional

from flask import (
    Blueprint,
    Flask,
    Response,
    g,
    redirect,
    render_template,
    request,
    url_for,
)

from keystore_service import errors
from keystore_service.domain import records as domain
from keystore_service.gateway.rules import SCOPE_PREFIX, is_hook_scope
from keystore_service.service.operations import ACTIONS
from keystore_service.storage import sessions as signins
from keystore_service.storage.accounts import Principal
from keystore_service.web import errors as web_errors
from keystore_service.web.context import keystore
from keystore_service.web.errors import HEADERS, CsrfRefused
from keystore_service.web.ui import (
    ui_bodies,
    ui_bulk,
    ui_chart,
    ui_gateway,
    ui_issues,
    ui_sends,
    ui_text,
)
from keystore_service.web.ui.ui_forms import (
    FIRST_REPORT_DAY,
    FormError,
    optional_int,
    record_ref,
    report_day,
    result,
    return_address,
    safe_next,
    utf8,
)
from keystore_service.web.ui.ui_session import (
    COOKIE,
    COOKIE_PATH,
    CSRF_FIELD,
    Session,
    csrf_ok,
    new_csrf,
)

log = logging.getLogger("keystore.ui")
bp = Blueprint("ui", __name__, url_prefix="/ui", template_folder="templates",
               static_folder="static/ui", static_url_path="/static")
CHART_DAYS = 14
QUEUE_PAGE = 50
ENDED = {"idle": "You were signed out after {idle} without activity.",
         "limit": "You were signed out: a session lasts at most 12 hours.",
         "revoked": "You were signed out: your operator token was revoked.",
         "signed_out": "You are signed out."}
DONE = {"mark_succeeded": "Marked succeeded.", "mark_failed": "Marked failed.",
        "release": "Released: the next claim may try again.",
        "dismiss": "Dismissed: the original stays as it was.",
        "expire": "Expired: the next claim of this key starts afresh."}


def init_app(app: Flask) -> None:
    app.register_blueprint(bp)


_ks = keystore


def _signins() -> signins.SignIns:
    return keystore().signins


def _tenant() -> int:
    return g.ui.tenant_id


# --- session, CSRF and headers, around every view ---------------------------------------

@bp.before_request
def _load_session() -> None:
    if request.endpoint == "ui.static":
        return
    if not utf8(request.query_string):  # request.args would raise (gunicorn refuses such
        raise FormError("this address holds bytes that are not text")  # a query; others may not)
    loaded = keystore().sessions.load(request.cookies.get(COOKIE))
    session, g.ui_ended = loaded.session, loaded.ended
    if session.signed_in:  # signed out elsewhere, or its token revoked: ended
        state = _signins().state(session.sid)
        if state != signins.LIVE:
            session, g.ui_ended = session.signed_out(), state
    g.ui = session
    if session.signed_in:
        g.principal = Principal(session.tenant_id, session.tenant, "operator",
                                session.token_name)
    if request.method == "POST" and not csrf_ok(session, request.form.get(CSRF_FIELD)):
        raise CsrfRefused()


@bp.after_request
def _finish(resp: Response) -> Response:
    session: Optional[Session] = g.get("ui")
    if session is not None:
        resp.set_cookie(COOKIE, keystore().sessions.dump(session),
                        path=COOKIE_PATH, httponly=True, samesite="Strict",
                        secure=request.is_secure or _ks().settings.ui_cookie_secure)
    if request.endpoint != "ui.static":
        resp.headers["Cache-Control"] = "no-store"
    resp.headers.update(HEADERS)
    return resp


def operator_page(view):
    """The view needs a signed-in operator; others go to the sign-in form (303)."""
    @wraps(view)
    def guarded(*args, **kwargs):
        if not g.ui.signed_in:
            back = return_address(request.path, request.args) if request.method == "GET" \
                else None
            return redirect(url_for("ui.signin", reason=g.ui_ended, next=back), 303)
        return view(*args, **kwargs)
    return guarded


@bp.context_processor
def _helpers() -> dict:
    return {"t": ui_text, "now": _ks().service.clock(), "csrf_field": CSRF_FIELD}


def _after_sign_in(target: Optional[str]) -> str:
    """Only a page of this site's /ui/ after signing in (never another host)."""
    return safe_next(target) or url_for("ui.queue")


# --- signing in and out --------------------------------------------------------------------

@bp.get("/signin")
def signin():
    if g.ui.signed_in:
        return redirect(_after_sign_in(request.args.get("next")), 303)
    reason = request.args.get("reason")
    notice = ENDED.get(reason, "").format(idle=ui_text.duration(
        _ks().settings.ui_idle_minutes * 60)) if reason else None
    return render_template("ui/signin.html", notice=notice,
                           next=safe_next(request.args.get("next")))


@bp.post("/signin")
def signin_post():
    token = request.form.get("token", "").strip()
    principal = _ks().accounts.principal(token) if 0 < len(token) <= 256 else None
    if principal is None or not principal.is_operator:
        error = ("That token was not accepted. Check that you pasted the whole token."
                 if principal is None else
                 "That is a client token. The page needs an operator token of your tenant.")
        status = 401 if principal is None else 403
        return render_template("ui/signin.html", error=error,
                               next=safe_next(request.form.get("next"))), status
    session = keystore().sessions.sign_in(
        principal.tenant_id, principal.tenant, principal.token_name)
    _signins().start(session.sid, principal.tenant_id, principal.token_name, session.seen)
    g.ui = session
    log.info("operator %r of tenant %r signed in to the page", principal.token_name,
             principal.tenant)
    return redirect(_after_sign_in(request.form.get("next")), 303)


@bp.post("/signout")
def signout():
    """Ends the session in the database: a copy of the cookie is refused from now on."""
    if g.ui.signed_in:
        _signins().end(g.ui.sid)
    g.ui = Session(csrf=new_csrf())
    return redirect(url_for("ui.signin", reason="signed_out"), 303)


# --- pages -------------------------------------------------------------------------------

@bp.get("/")
@operator_page
def queue():
    kind = request.args.get("kind") or None
    scope = request.args.get("scope", "").strip() or None
    if kind not in (None, *domain.ReviewKind):
        raise FormError("kind is one of " + ", ".join(domain.ReviewKind))
    if scope is not None:
        scope, _ = record_ref({"scope": scope, "key": "-"})
    page, cursor = _ks().operations.list_reviews(
        _tenant(), "open", kind, scope, None, 0, QUEUE_PAGE,
        request.args.get("cursor") or None)
    return render_template("ui/queue.html", items=page, next_cursor=cursor, kind=kind,
                           scope=scope, first_page=not request.args.get("cursor"))


@bp.get("/record")
@operator_page
def record():
    scope, key = record_ref(request.args)
    ks, tenant = _ks(), _tenant()
    found = ks.service.records.get(tenant, scope, key)
    if found is None:
        raise errors.NotFound(f"There is no record with key “{key}” in scope “{scope}”.")
    now = ks.service.clock()
    open_reviews = [v for v, _ in ks.operations.list_reviews(tenant, "open", scope=scope,
                                                             key=key)[0]]
    resolved = [v for v, _ in ks.operations.list_reviews(tenant, "resolved", scope=scope,
                                                         key=key, limit=20)[0]]
    done = request.args.get("done")
    audit = ks.oversight.audit_trail(tenant, scope, key)
    payloads = {v.id: ui_bodies.compare_payloads(ks.operations.kept(v, found))
                for v in open_reviews if v.kind == domain.ReviewKind.FINGERPRINT_MISMATCH}
    return render_template(
        "ui/record.html", r=found, open_reviews=open_reviews, resolved=resolved,
        payloads=payloads, late=ks.service.traces.of_key(tenant, scope, key),
        attempts=ks.service.records.attempt_history(found.id),
        audit=audit, send_trail=ui_sends.trail(tenant, found, audit, resolved),
        answer_shown=ui_sends.shown, expired=domain.expired(found, now),
        lease_live=domain.lease_live(found, now),
        finished=found.state in domain.FINISHED, done=DONE.get(done or ""),
        hook_source=scope[len(SCOPE_PREFIX):] if is_hook_scope(scope) else None)


@bp.post("/resolve")
@operator_page
def resolve():
    scope, key = record_ref(request.form)
    action = request.form.get("action", "")
    if action not in ACTIONS:
        raise FormError("choose one of the buttons: mark succeeded, mark failed, release or "
                        "dismiss")
    if action == "release" and is_hook_scope(scope):  # as POST /v1/resolve: 400
        raise FormError("release is not for a webhook event: it would let a resend in again")
    text, resource_id = result(request.form) if action.startswith("mark_") else (None, None)
    _ks().operations.resolve(g.principal, scope, key, action,
                             optional_int(request.form, "review_id", least=1), text,
                             resource_id)
    return redirect(url_for("ui.record", scope=scope, key=key, done=action), 303)


@bp.post("/expire")
@operator_page
def expire():
    scope, key = record_ref(request.form)
    _ks().operations.expire(g.principal, scope, key)
    log.info("operator %r expired %r/%r", g.ui.token_name, scope, key)  # %r: escaped
    return redirect(url_for("ui.record", scope=scope, key=key, done="expire"), 303)


@bp.get("/search")
@operator_page
def search():
    scope = request.args.get("scope", "").strip()
    key = request.args.get("key", "")
    found, missing = None, None
    if scope and key:
        scope, key = record_ref({"scope": scope, "key": key})
        if _ks().service.records.get(_tenant(), scope, key) is not None:
            return redirect(url_for("ui.record", scope=scope, key=key), 303)
        missing = key
    if scope:
        scope, _ = record_ref({"scope": scope, "key": "-"})
        found = _ks().oversight.records_of_scope(_tenant(), scope)
    return render_template("ui/search.html", scope=scope, key=key, found=found,
                           missing=missing), 404 if missing else 200


@bp.get("/stuck")
@operator_page
def stuck():
    return render_template("ui/stuck.html",
                           items=_ks().oversight.stuck(_tenant(), _ks().service.clock()))


@bp.get("/report")
@operator_page
def report():
    ks, now = _ks(), _ks().service.clock()
    today = ui_text.instant(now).date()
    day = report_day(request.args["date"]) if request.args.get("date") else today
    body = ks.reports.daily(_tenant(), day, now)
    totals = {name: sum(s[name] for s in body["scopes"]) for name in (
        "claimed", "succeeded", "failed", "released", "in_progress", "waiting_for_review",
        "duplicates_suppressed", "mismatches")}
    chart = ui_chart.bars(ks.reports.duplicates_per_day(_tenant(), CHART_DAYS, day))
    return render_template("ui/report.html", day=day, today=today, first=FIRST_REPORT_DAY,
                           report=body, totals=totals, chart=chart)


web_errors.install_page(bp)
ui_gateway.install(bp, operator_page)  # the Webhooks section
ui_bulk.install(bp, operator_page)  # its bulk actions
ui_issues.install(bp, operator_page)  # the Issues section
ui_sends.install(bp, operator_page)  # the Connections page (a record's trail: record())
