"""The operators' page's Webhooks section, added to the page's own blueprint by ui.py
(install: the same session, CSRF check, headers and error pages): the tenant's sources with
their queues and pauses, the deliveries with their attempts, one event (a held body beside
the original; a failed delivery's last answers), and the Redeliver, Dismiss, Retry now,
Pause and Resume buttons.

Views only: each parses its fields (ui_forms), calls the gateway's use cases (deliveries,
sources) or operations.resolve, and renders. Everything is the signed-in operator's tenant.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Optional

from flask import Blueprint, g, redirect, render_template, request, url_for
from pydantic import ValidationError

from keystore_service import errors
from keystore_service.domain import versions
from keystore_service.domain.deliveries import DeliveryState
from keystore_service.gateway.rules import scope_of
from keystore_service.gateway.sources import paused_of
from keystore_service.storage.events import ATTEMPTS_SHOWN
from keystore_service.web.api import gateway_schemas
from keystore_service.web.context import keystore
from keystore_service.web.errors import error_page
from keystore_service.web.ui import ui_bodies
from keystore_service.web.ui.ui_forms import (
    DELIVERY_STATES,
    FormError,
    confirmed,
    cursor,
    destination_name,
    delivery_state,
    event_ref,
    optional_int,
    source_name,
    type_glob,
)

log = logging.getLogger("keystore.ui")
PAUSE_RULES = {"until": "until is a time with its zone, as 2027-01-31T18:00:00Z or "
                        "2027-01-31T19:00:00+01:00 (leave it empty to pause until resumed)",
               "reason": f"the reason is 1 to {gateway_schemas.MAX_REASON} characters on one "
                         "line, without control characters"}
FAILED_SHOWN = 20  # failed deliveries on the section's first page; the rest on Deliveries
DELIVERIES_PAGE = 50  # as the API's default page
DONE = {"redelivered": "Redelivered: the event is queued and goes out again with the same "
                       "Idempotency-Key.",
        "dismissed": "Dismissed: the review is closed; nothing was forwarded and the event "
                     "stays as it was.",
        "retried": "Retry now: the queued events are due at once (a paused source still "
                   "holds them until it is resumed).",
        "paused": "Paused: events are still accepted, none is forwarded, and the paused "
                  "time does not count toward their retry windows. Resume ends it."}
# The gateway's refusals of a redelivery, said for the page (web/errors.py's KNOWN speaks of
# records being marked, which is not what happened here).
REFUSED = {
    errors.InProgress: "The event is queued or being forwarded right now, so it cannot be "
                       "redelivered. Wait for this forward's outcome.",
    errors.AlreadyCompleted: "The event was delivered already. To send it once more, tick "
                             "“Yes, deliver it again” beside Redeliver anyway.",
    errors.BodyDropped: "The event's body is no longer kept (it is dropped some time after "
                        "delivery, by the source's keep_body_seconds), so it cannot be sent "
                        "again.",
}


def _gateway():
    return keystore().gateway


def _tenant() -> int:
    return g.ui.tenant_id


def _event_url(source: str, event_id: str, done: Optional[str] = None,
               destination: Optional[str] = None) -> str:
    return url_for("ui.hook_event", source=source, event_id=event_id, done=done,
                   destination=destination)


def hooks():
    """The section's first page: the sources with their queues and pauses, the newest
    failures."""
    sources = _gateway().sources.overview(_tenant())
    failed, more = _gateway().deliveries.list(_tenant(), state=DeliveryState.FAILED.value,
                                               limit=FAILED_SHOWN)
    now = _gateway().sources.clock()
    return render_template("ui/hooks.html", sources=sources, failed=failed, more=more,
                           attempts_shown=ATTEMPTS_SHOWN,
                           broken=_gateway().sources.broken(_tenant()),
                           paused={s.id: paused_of(s, now) for s, _ in sources},
                           views={s.id: _gateway().sources.store.views(s) if s.fanout > 1
                                  else [s] for s, _ in sources},
                           done=DONE.get(request.args.get("done") or ""))


def hook_deliveries():
    args = request.args
    source = source_name(args["source"]) if args.get("source") else None
    state, after = delivery_state(args.get("state")), cursor(args.get("cursor"))
    kind = type_glob(args.get("event_type"))
    destination = destination_name(args.get("destination"))  # an issue's link names one
    page, next_cursor = _gateway().deliveries.list(_tenant(), source, state, None,
                                                   DELIVERIES_PAGE, after, kind, destination)
    names = [s.name for s, _ in _gateway().sources.overview(_tenant())]
    return render_template("ui/deliveries.html", items=page, next_cursor=next_cursor,
                           source=source, state=state, states=DELIVERY_STATES, names=names,
                           event_type=kind, destination=destination,
                           first_page=after is None, attempts_shown=ATTEMPTS_SHOWN)


def hook_event():
    source, event_id = event_ref(request.args)
    detail = _gateway().deliveries.detail(_tenant(), source, event_id,
                                          destination_name(request.args.get("destination")))
    held = next((v for v in detail.reviews if v.kind == "fingerprint_mismatch"), None)
    failed = next((v for v in detail.reviews if v.kind == "delivery_failed"
                   and v.destination in ("", detail.destination)), None)
    compare = _held_bodies(detail.event.body, held.kept) if held and held.kept else None
    return render_template("ui/hook_event.html", d=detail, held=held, failed=failed,
                           compare=compare, failed_answers=_answers(failed),
                           headers=_pairs(_json_value(detail.event.headers)),
                           body=ui_bodies.shown(detail.event.body),
                           paused=paused_of(detail.source, _gateway().sources.clock()),
                           done=DONE.get(request.args.get("done") or ""),
                           superseded_by=_superseded_by(detail))


def _superseded_by(detail) -> Optional[str]:
    """The event id a superseded event's record names as the version delivered before it
    (gateway/ordering.py); None for another state, or when that event is forgotten."""
    if detail.event.state != DeliveryState.SUPERSEDED or not detail.record.result:
        return None
    try:
        by = json.loads(detail.record.result).get("by")
    except (ValueError, AttributeError):
        return None
    return by if isinstance(by, str) else None


def hook_redeliver():
    source, event_id = event_ref(request.form)
    force = confirmed(request.form, "force")
    to = destination_name(request.form.get("destination"))
    try:
        _gateway().deliveries.redeliver(_tenant(), source, event_id, force, to)
    except tuple(REFUSED) as exc:
        message = next(m for c, m in REFUSED.items() if isinstance(exc, c))
        return error_page(409, message, _event_url(source, event_id, None, to))
    except errors.InvalidRequest:  # several deliveries, none named
        return error_page(400, "This event has a delivery to each of its source's "
                          "destinations: redeliver it from one destination's line of the "
                          "event's page. Nothing was changed.", _event_url(source, event_id))
    log.info("operator %r redelivered %r/%r to %r%s", g.ui.token_name, source, event_id,
             to or "its destination", " (forced)" if force else "")  # %r: escaped
    return redirect(_event_url(source, event_id, "redelivered", to), 303)


def hook_resume():
    """End a source's pause, as POST /v1/sources/<name>/resume does."""
    name = source_name(request.form.get("source"))
    try:
        _gateway().sources.resume(_tenant(), name)
    except errors.NotFound:
        return error_page(404, "There is no such source: nothing was changed.",
                          url_for("ui.hooks"))
    _gateway().wake()
    log.info("operator %r resumed source %r", g.ui.token_name, name)  # %r: escaped
    return redirect(url_for("ui.hooks"), 303)


def hook_pause():
    """Pause a source, as POST /v1/sources/<name>/pause does: an end (RFC 3339, optional)
    and a reason (optional), each by the API's rules."""
    name = source_name(request.form.get("source"))
    until, reason = pause_fields(request.form)
    try:
        _gateway().sources.pause(_tenant(), name, until, reason)
    except errors.NotFound:
        return error_page(404, "There is no such source: nothing was changed.",
                          url_for("ui.hooks"))
    except errors.InvalidRequest as exc:
        return error_page(400, f"{exc.message}: nothing was changed.", url_for("ui.hooks"))
    log.info("operator %r paused source %r", g.ui.token_name, name)  # %r: escaped
    return redirect(url_for("ui.hooks", done="paused"), 303)


def hook_retry():
    """Retry now, as POST /v1/deliveries/retry does: one queued event (the event's page)
    or every queued event of a source (the section's page)."""
    name = source_name(request.form.get("source"))
    event_id = event_ref(request.form)[1] if request.form.get("event_id") else None
    to = destination_name(request.form.get("destination"))
    back = _event_url(name, event_id, None, to) if event_id else url_for("ui.hooks")
    try:
        due = _gateway().deliveries.retry(_tenant(), name, event_id, to)
    except errors.NotFound:
        return error_page(404, "There is no such source or event: nothing was changed.",
                          url_for("ui.hooks"))
    except errors.InvalidRequest:  # several deliveries, none named
        return error_page(400, "This event has a delivery to each of its source's "
                          "destinations: retry it from one destination's line of the "
                          "event's page. Nothing was changed.", back)
    except (errors.InProgress, errors.AlreadyCompleted) as exc:
        return error_page(409, f"The event is {exc.details.get('state')}, not queued: "
                          "nothing was changed. A failed or delivered event is sent again "
                          "with Redeliver.", back)
    log.info("operator %r retried %d event(s) of source %r now", g.ui.token_name, due, name)
    if event_id:
        return redirect(_event_url(name, event_id, "retried", to), 303)
    return redirect(url_for("ui.hooks", done="retried"), 303)


def hook_dismiss():
    """Close the event's review as POST /v1/resolve's `dismiss` does (with the audit row)."""
    source, event_id = event_ref(request.form)
    review_id = optional_int(request.form, "review_id", least=1)
    if review_id is None:
        raise FormError("review id is missing: use the Dismiss button of a review")
    keystore().operations.resolve(
        g.principal, scope_of(source), event_id, "dismiss", review_id)
    return redirect(_event_url(source, event_id, "dismissed"), 303)


def install(bp: Blueprint, guard: Callable) -> None:
    """Add the section's views to the page's blueprint, each behind `guard` (ui's
    operator_page: a signed-in operator, else the sign-in form)."""
    for method, rule, view in (("GET", "/hooks", hooks),
                               ("GET", "/hooks/deliveries", hook_deliveries),
                               ("GET", "/hooks/event", hook_event),
                               ("POST", "/hooks/redeliver", hook_redeliver),
                               ("POST", "/hooks/resume", hook_resume),
                               ("POST", "/hooks/pause", hook_pause),
                               ("POST", "/hooks/retry", hook_retry),
                               ("POST", "/hooks/dismiss", hook_dismiss)):
        bp.add_url_rule(rule, view.__name__, guard(view), methods=[method])


def pause_fields(fields) -> tuple[Optional[int], Optional[str]]:
    """(until in Micros or None, reason or None) from the fields `until` and `reason`, by
    the API's rules (gateway_schemas.Pause); empty fields are absent."""
    given = {k: fields.get(k, "").strip() or None for k in ("until", "reason")}
    try:
        body = gateway_schemas.Pause(**given)
    except ValidationError as exc:
        field = exc.errors()[0]["loc"][0]
        raise FormError(PAUSE_RULES.get(str(field), "the pause's fields are not valid")) \
            from None
    return (versions.parse(body.until)[1] if body.until else None), body.reason


def _held_bodies(original: Optional[bytes], kept: str) -> dict:
    """The original body beside the held one (the review's `kept`: {"headers", "body"}, or
    {"headers", "body": null, "too_large": n} for a body over 64 KiB)."""
    held = _json_value(kept)
    held = held if isinstance(held, dict) else {}
    body = held.get("body")
    left = ui_bodies.shown(original)
    right = ui_bodies.shown(body) if isinstance(body, str) else None
    lines = ui_bodies.side_by_side(left, right) if left and right else None
    too_large = held.get("too_large")
    return {"original": left, "held": right, "lines": lines,
            "too_large": too_large if type(too_large) is int else None,
            "headers": _pairs(held.get("headers"))}


def _answers(review) -> list[dict]:
    """A delivery_failed review's last answers ({"attempts": [{at, status_code, error,
    answer}]}), each field of the expected type or left out."""
    if review is None or not review.kept:
        return []
    kept = _json_value(review.kept)
    attempts = kept.get("attempts") if isinstance(kept, dict) else None
    out = []
    for a in attempts if isinstance(attempts, list) else []:
        if isinstance(a, dict):
            out.append({k: a.get(k) if isinstance(a.get(k), t) and type(a.get(k)) is not bool
                        else None for k, t in (("at", int), ("status_code", int),
                                               ("error", str), ("answer", str))})
    return out


def _pairs(headers) -> list[tuple[str, str]]:
    """Stored headers ([[name, value], ...]) as pairs of text; anything else left out."""
    if not isinstance(headers, list):
        return []
    return [(p[0], p[1]) for p in headers
            if isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)]


def _json_value(text: str):
    """Stored JSON the gateway wrote; None if it does not parse (never an error page)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None
