"""The operators' page's bulk actions, added to the page's blueprint by ui.py (install: the
same session, CSRF check, headers and error pages): a filter, a dry run that says how many
events match, a confirm step, and a job page with a progress bar that refreshes itself (a
meta refresh: the page runs no script) and a Cancel button.

Views only: the fields are checked by the API's own models (bulk_schemas.BulkFilter), the
gateway's Bulk does the work. The confirm form carries an idempotency key made when it was
shown, so a form sent twice (a double click, a reload) answers the same job."""
from __future__ import annotations

import json
import logging
import re
import secrets
from collections.abc import Callable, Mapping

from flask import Blueprint, g, redirect, render_template, request, url_for
from pydantic import ValidationError

from keystore_service import errors
from keystore_service.domain.bulk import ACTIONS
from keystore_service.domain.deliveries import DELIVERY_STATES
from keystore_service.web.api import bulk_schemas
from keystore_service.web.context import keystore
from keystore_service.web.errors import error_page
from keystore_service.web.ui.ui_forms import FormError, confirmed

log = logging.getLogger("keystore.ui")
FIELDS = ("source", "destination", "state", "event_type", "received_after", "received_before",
          "last_error")
REFRESH_SECONDS = 2  # the job page reloads itself this often while the job runs
# <input type="datetime-local"> sends "2026-12-02T10:30" (or with seconds): read as UTC.
_LOCAL = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2})?")
ACTION_WORDS = {"redeliver": "Redeliver", "retry": "Retry now", "dismiss": "Dismiss"}


def _bulk():
    return keystore().gateway.bulk


def _fields(form: Mapping[str, str]) -> dict:
    """The filter's fields that were filled in, times of a datetime-local input as UTC."""
    out = {}
    for name in FIELDS:
        value = (form.get(name) or "").strip()
        if not value:
            continue
        if name.startswith("received_") and _LOCAL.fullmatch(value):
            value += ("Z" if value.count(":") == 2 else ":00Z")
        out[name] = value
    return out


def _filter(form: Mapping[str, str]) -> bulk_schemas.BulkFilter:
    try:
        return bulk_schemas.BulkFilter.model_validate(_fields(form))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the filter"
        raise FormError(f"{where}: {first['msg']}") from None


def _action(form: Mapping[str, str]) -> str:
    action = form.get("action") or "redeliver"
    if action not in ACTIONS:
        raise FormError("the action is redeliver, retry or dismiss")
    return action


def hook_bulk():
    """The form; with `count`, the dry run's answer and the confirm step."""
    args = request.args
    action = _action(args)
    chosen = _filter(args) if args.get("count") else None
    force = confirmed(args, "force") if action == "redeliver" else False
    matched = _bulk().dry_run(g.principal.tenant_id, chosen.as_filter()) if chosen else None
    names = [s.name for s, _ in keystore().gateway.sources.overview(g.principal.tenant_id)]
    return render_template("ui/bulk.html", action=action, actions=ACTION_WORDS,
                           fields=_fields(args), states=DELIVERY_STATES, names=names,
                           matched=matched, force=force, shown=chosen.shown() if chosen
                           else None, key=secrets.token_urlsafe(18))


def hook_bulk_start():
    form = request.form
    action, chosen = _action(form), _filter(form)
    force = confirmed(form, "force") if action == "redeliver" else False
    key = form.get("key") or ""
    if not re.fullmatch(r"[A-Za-z0-9_-]{16,64}", key):
        raise FormError("the form is missing its key: open the bulk form again")
    if not confirmed(form, "confirm"):
        raise FormError("tick the box to confirm the bulk action")
    try:
        job, _ = _bulk().start(g.principal, action, chosen.as_filter(), chosen.shown(), force,
                               "ui:" + key)
    except errors.FingerprintMismatch:
        return error_page(409, "This form was sent already with other choices: open the "
                               "bulk form again.", url_for("ui.hook_bulk"))
    log.info("operator %r started bulk %s job %d", g.ui.token_name, action, job.id)
    return redirect(url_for("ui.hook_job", job_id=job.id), 303)


def _job_id(text: str) -> int:
    if not re.fullmatch("[0-9]{1,18}", text):
        raise errors.NotFound("no such job")
    return int(text)


def hook_job(job_id: str):
    job = _bulk().get(g.principal.tenant_id, _job_id(job_id))
    running = job.state == "running"
    return render_template("ui/bulk_job.html", job=job, running=running,
                           refresh=REFRESH_SECONDS if running else None,
                           filter_text=_shown(job.filter), actions=ACTION_WORDS,
                           cancelled=request.args.get("cancelled"))


def _shown(stored: str) -> str:
    """A job's filter for a person: "source = shop, state = failed", or every event."""
    chosen = json.loads(stored)
    return ", ".join(f"{k} = {v}" for k, v in chosen.items()) or "every event"


def hook_job_cancel(job_id: str):
    number = _job_id(job_id)
    try:
        _bulk().cancel(g.principal.tenant_id, number)
    except errors.AlreadyCompleted:  # finished before the click: the page says so
        return redirect(url_for("ui.hook_job", job_id=number, cancelled="0"), 303)
    log.info("operator %r cancelled bulk job %d", g.ui.token_name, number)
    return redirect(url_for("ui.hook_job", job_id=number, cancelled="1"), 303)


def install(bp: Blueprint, guard: Callable) -> None:
    for method, rule, view in (("GET", "/hooks/bulk", hook_bulk),
                               ("POST", "/hooks/bulk", hook_bulk_start),
                               ("GET", "/hooks/jobs/<job_id>", hook_job),
                               ("POST", "/hooks/jobs/<job_id>/cancel", hook_job_cancel)):
        bp.add_url_rule(rule, view.__name__, guard(view), methods=[method])
