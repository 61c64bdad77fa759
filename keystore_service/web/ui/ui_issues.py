"""The operators' page's Issues section, added to the page's blueprint by ui.py (the same
session, CSRF check, headers and error pages): the tenant's issues with what opened each and
a link to the events or reviews behind it, the Acknowledge / Resolve / Ignore buttons, and
the alert channels with a Test button each.

Views only: each parses its fields, calls the gateway's issues and channels, and renders."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Optional

from flask import Blueprint, g, redirect, render_template, request, url_for

from keystore_service import errors
from keystore_service.domain import issues as words
from keystore_service.domain.deliveries import DeliveryState
from keystore_service.domain.records import ReviewKind
from keystore_service.storage.issues import Issue
from keystore_service.web.context import keystore
from keystore_service.web.errors import error_page
from keystore_service.web.ui.ui_forms import FormError

log = logging.getLogger("keystore.ui")
ACTIONS = {"acknowledge": "Acknowledged: no more reminders; it still resolves by itself.",
           "resolve": "Resolved. If its condition still holds, the next look opens a new "
                      "issue.",
           "ignore": "Ignored: no other issue opens for it until its condition clears.",
           "test": "A test notice is queued: the channel hears it within a few seconds."}
MAX_ID = 2 ** 63 - 1


def behind(issue: Issue) -> tuple[str, str]:
    """(link, words) to what is behind the issue: the source's events, or the reviews."""
    if issue.kind == "reviews_waiting":
        scope, kind = words.split_review_subject(issue.subject)
        return url_for("ui.queue", scope=scope, kind=kind), f"the {kind} reviews of {scope}"
    if issue.kind == "delivery_failing":  # a source, or source/destination (several)
        source, destination = words.split_delivery_subject(issue.subject)
        return (url_for("ui.hook_deliveries", source=source, destination=destination,
                        state=DeliveryState.FAILED.value),
                f"the failed deliveries of {issue.subject}")
    if issue.kind == "backlog":
        return (url_for("ui.hook_deliveries", source=issue.subject,
                        state=DeliveryState.QUEUED.value),
                f"the queued deliveries of {issue.subject}")
    if issue.kind == "send_unresolved":  # its subject is the connection
        return (url_for("ui.queue", kind=ReviewKind.SEND_UNKNOWN.value),
                f"the send_unknown reviews (connection {issue.subject})")
    return url_for("ui.hooks"), "the Webhooks page"


def issues_page():
    gw = keystore().gateway
    state = request.args.get("state") or None
    if state not in (None, "all", *words.ISSUE_STATES):
        raise FormError("state is one of " + ", ".join(words.ISSUE_STATES))
    shown = gw.issues.page(g.ui.tenant_id, None if state in (None, "all") else state, None)
    if state is None:  # the first view: what needs a person, then the newest history
        shown = [i for i in shown if i.resolved_at is None] + \
                [i for i in shown if i.resolved_at is not None][:20]
    return render_template("ui/issues.html", issues=shown, behind=behind, state=state,
                           states=words.ISSUE_STATES, channels=gw.channels.all(g.ui.tenant_id),
                           done=ACTIONS.get(request.args.get("done") or ""))


def issue_act():
    action = request.form.get("action", "")
    if action not in ("acknowledge", "resolve", "ignore"):
        raise FormError("action is acknowledge, resolve or ignore")
    issue_id = _issue_id(request.form.get("issue_id"))
    try:
        keystore().gateway.issues.act(g.ui.tenant_id, issue_id, action, g.ui.token_name)
    except errors.NotFound:
        return error_page(404, "There is no such issue: nothing was changed.",
                          url_for("ui.issues_page"))
    except errors.AlreadyCompleted:
        return error_page(409, "The issue was resolved or ended meanwhile: nothing was "
                          "changed.", url_for("ui.issues_page"))
    log.info("operator %r: %s issue %d", g.ui.token_name, action, issue_id)
    return redirect(url_for("ui.issues_page", done=action) + f"#issue-{issue_id}", 303)


def channel_test():
    name = request.form.get("channel", "")
    try:
        keystore().gateway.channels.test(g.ui.tenant_id, name)
    except errors.NotFound:
        return error_page(404, "There is no such channel: nothing was sent.",
                          url_for("ui.issues_page"))
    loop = keystore().gateway.alert_loop
    if loop is not None:
        loop.wake()
    return redirect(url_for("ui.issues_page", done="test"), 303)


def _issue_id(value: Optional[str]) -> int:
    if not value or not value.isascii() or not value.isdigit() or not 0 < int(value) <= MAX_ID:
        raise FormError("issue id is missing: use the buttons of an issue")
    return int(value)


def install(bp: Blueprint, guard: Callable) -> None:
    """Add the section's views to the page's blueprint, each behind `guard`."""
    for method, rule, view in (("GET", "/issues", issues_page),
                               ("POST", "/issues/act", issue_act),
                               ("POST", "/issues/test", channel_test)):
        bp.add_url_rule(rule, view.__name__, guard(view), methods=[method])
