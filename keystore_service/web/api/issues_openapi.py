"""/openapi.json's entries for /v1/issues and /v1/alert-channels (openapi.py adds them),
from the models of issue_schemas.py."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from keystore_service.domain.names import NAME_PATTERN
from keystore_service.web.api import issue_schemas as ish
from keystore_service.web.api import schemas


def paths(json_: Callable, errors_: Callable, body_of: Callable, query: Callable) -> dict:
    op = errors_("400", "401", "403", "429", "503")
    missing = {"404": json_(schemas.ErrorResponse, "no such channel")}
    name = [{"name": "name", "in": "path", "required": True,
             "schema": {"type": "string", "pattern": NAME_PATTERN}}]
    one = {"200": json_(ish.ChannelResponse, "the channel (never its URL's path or secret)"),
           **op, **missing}

    def act(action: str, summary: str) -> dict[str, Any]:
        return {"post": {
            "summary": summary, "operationId": f"{action}Issue",
            "parameters": [{"name": "id", "in": "path", "required": True,
                            "schema": {"type": "integer", "minimum": 1,
                                       "maximum": 2 ** 63 - 1}}],
            "responses": {"200": json_(ish.IssueResponse, "the issue"), **op,
                          "404": json_(schemas.ErrorResponse, "no such issue"),
                          "409": json_(schemas.ErrorResponse,
                                       "already_completed: resolved or ended already")}}}
    return {
        "/v1/issues": {"get": {
            "summary": "The tenant's issues, newest first (operator)", "operationId":
            "listIssues", "parameters": query(ish.IssuesQuery),
            "responses": {"200": json_(ish.IssuesResponse, "ok"), **op}}},
        "/v1/issues/{id}/acknowledge": act("acknowledge", "Acknowledge: no more reminders"),
        "/v1/issues/{id}/resolve": act("resolve", "Resolve (it opens again if its condition "
                                                  "still holds)"),
        "/v1/issues/{id}/ignore": act("ignore", "Ignore until its condition clears"),
        "/v1/alert-channels": {
            "post": {"summary": "Create an alert channel (operator)", "operationId":
                     "createChannel", "requestBody": body_of(ish.ChannelCreate),
                     "responses": {"201": json_(ish.ChannelResponse, "created"), **op,
                                   **errors_("413")}},
            "get": {"summary": "The tenant's alert channels (operator)", "operationId":
                    "listChannels",
                    "responses": {"200": json_(ish.ChannelsResponse, "ok"), **op}}},
        "/v1/alert-channels/{name}": {
            "get": {"summary": "One channel", "operationId": "showChannel",
                    "parameters": name, "responses": one},
            "patch": {"summary": "Change a channel", "operationId": "changeChannel",
                      "parameters": name, "requestBody": body_of(ish.ChannelChange),
                      "responses": {**one, **errors_("413")}},
            "delete": {"summary": "Delete a channel (its unsent notices too)",
                       "operationId": "deleteChannel", "parameters": name,
                       "responses": one}},
        "/v1/alert-channels/{name}/test": {"post": {
            "summary": "Queue a test notice to the channel", "operationId": "testChannel",
            "parameters": name,
            "responses": {"202": json_(ish.TestQueued, "the test notice is queued"), **op, **missing}}},
    }
