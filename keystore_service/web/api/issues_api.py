"""The operators' /v1/issues and /v1/alert-channels. Parse, call the gateway's issues and
channels, render; nothing else lives here."""
from __future__ import annotations

from flask import Blueprint, g, request

from keystore_service import errors
from keystore_service.domain.issues import NoticeState
from keystore_service.gateway.channels import ShownChannel
from keystore_service.service.auth import require_operator
from keystore_service.web.api import issue_schemas, parsing
from keystore_service.web.api.render import respond, rfc3339
from keystore_service.web.context import keystore

v1 = Blueprint("issues_v1", __name__, url_prefix="/v1")
MAX_ISSUE_ID = 2 ** 63 - 1
ACTIONS = ("acknowledge", "resolve", "ignore")


def _gw():
    require_operator(g.principal)
    return keystore().gateway


def _base() -> str:
    return keystore().settings.public_url or request.host_url


@v1.get("/issues")
def list_issues():
    gw = _gw()
    q = parsing.validate(issue_schemas.IssuesQuery, request.args.to_dict())
    found = gw.issues.page(g.principal.tenant_id, q.state, q.kind)
    return respond({"issues": [gw.issues.json(i, _base()) for i in found]})


@v1.post("/issues/<issue_id>/<action>")
def act_on_issue(issue_id: str, action: str):
    gw = _gw()
    if action not in ACTIONS:
        raise errors.NotFound("no such action: acknowledge, resolve or ignore")
    if not (issue_id.isascii() and issue_id.isdigit()) or not 0 < int(issue_id) <= MAX_ISSUE_ID:
        raise errors.NotFound(f"no issue {issue_id[:32]!r}")
    issue = gw.issues.act(g.principal.tenant_id, int(issue_id), action,
                          g.principal.token_name)
    return respond({"issue": gw.issues.json(issue, _base())})


@v1.post("/alert-channels")
def create_channel():
    shown = _gw().channels.create(g.principal.tenant_id,
                                  parsing.body(issue_schemas.ChannelCreate))
    return respond({"channel": channel_json(shown)}, 201)


@v1.get("/alert-channels")
def list_channels():
    return respond({"channels": [channel_json(c) for c in _gw().channels.all(
        g.principal.tenant_id)]})


@v1.get("/alert-channels/<name>")
def show_channel(name: str):
    return respond({"channel": channel_json(_gw().channels.get(g.principal.tenant_id, name))})


@v1.patch("/alert-channels/<name>")
def change_channel(name: str):
    gw = _gw()
    shown = gw.channels.change(g.principal.tenant_id, name,
                               parsing.body(issue_schemas.ChannelChange))
    return respond({"channel": channel_json(shown)})


@v1.delete("/alert-channels/<name>")
def delete_channel(name: str):
    return respond({"channel": channel_json(_gw().channels.delete(g.principal.tenant_id,
                                                                   name))})


@v1.post("/alert-channels/<name>/test")
def test_channel(name: str):
    gw = _gw()
    gw.channels.test(g.principal.tenant_id, name)
    if gw.alert_loop is not None:
        gw.alert_loop.wake()
    return respond({"status": NoticeState.QUEUED.value}, 202)


def channel_json(shown: ShownChannel) -> dict:
    c = shown.channel
    return {"name": c.name, "kind": c.kind, "url": c.shown, "has_secret": shown.has_secret,
            "to": c.to_address, "kinds": c.kind_list,
            "remind_after_seconds": c.remind_after_seconds,
            "daily_report": bool(c.daily_report), "created_at": rfc3339(c.created_at),
            "updated_at": rfc3339(c.updated_at)}
