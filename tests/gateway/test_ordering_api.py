"""A destination's ordering per key through the API and the command line (issue 29,
"Ordering per key"), on both backends: what is given is stored and shown in route_specs'
normal form, a PATCH of the destination replaces it (null or absent clears it), and every
ordering route_specs refuses is a 400 naming the field that changes nothing."""
from __future__ import annotations

import json

import jsonschema

from keystore_service.domain import route_specs
from keystore_service.web.api.openapi import document

from .support import SECRET, cli, create_source

SINK = "http://127.0.0.1:9/hook"  # never reached: these tests forward nothing
PUBLISHED = document()["components"]
GOOD = {"key": "/data/object/id", "mode": "newer_wins", "version": "/created"}


def _source(gw, name="shop"):
    status, body, _ = gw.get(f"/v1/sources/{name}")
    assert status == 200, body
    return body["source"]


def _patch(gw, body, name="shop"):
    r = gw.client.patch(f"/v1/sources/{name}", json=body, headers=gw._auth(...))
    return r.status_code, r.get_json(silent=True)


def _stored(gw_app, name="shop") -> dict:
    ks = gw_app.extensions["keystore"]
    return ks.gateway.sources.get(ks.accounts.tenant_id("acme"), name).source.options["forward"]


def test_an_ordering_is_stored_and_shown_in_its_normal_form(gw, gw_app):
    given = {"version": "/données/١٢", "mode": "newer_wins", "key": "/a~1b/é"}
    made = create_source(gw, gw.token, SINK, destination={"url": SINK, "ordering": given})
    assert made["destination"]["ordering"] == given
    assert _source(gw)["destination"]["ordering"] == given
    assert gw.get("/v1/sources")[1]["sources"][0]["destination"]["ordering"] == given
    assert _stored(gw_app)["ordering"] == given
    # another field's PATCH leaves it; a PATCH of the destination replaces it
    assert _patch(gw, {"max_in_flight": 2})[0] == 200
    assert _source(gw)["destination"]["ordering"] == given
    status, body = _patch(gw, {"destination": {"url": SINK, "ordering": GOOD,
                                               "filter": {"event_types": ["invoice.*"]}}})
    assert status == 200 and body["source"]["destination"]["ordering"] == GOOD, body
    assert body["source"]["destination"]["filter"] == {"event_types": ["invoice.*"]}
    for cleared in ({"url": SINK}, {"url": SINK, "ordering": None}):
        assert _patch(gw, {"destination": {"url": SINK, "ordering": GOOD}})[0] == 200
        status, body = _patch(gw, {"destination": cleared})
        assert status == 200 and body["source"]["destination"]["ordering"] is None, body
        assert "ordering" not in _stored(gw_app)


LONG = "/" + "x" * 256
BAD = [
    ([], "must be an object"), ("newer_wins", "must be an object"), (1, "must be an object"),
    ({}, "key: required"), ({"key": "/id", "version": "/v"}, "mode: required"),
    ({**GOOD, "key": ""}, "whole body"), ({**GOOD, "version": ""}, "whole body"),
    ({**GOOD, "key": "id"}, "not a JSON Pointer"), ({**GOOD, "key": "/~2"}, "not a JSON Pointer"),
    ({**GOOD, "key": LONG}, "at most 256"), ({**GOOD, "key": 1}, "must be a string"),
    ({**GOOD, "key": None}, "must be a string"), ({**GOOD, "version": ["/v"]}, "must be a string"),
    ({**GOOD, "mode": "NEWER_WINS"}, "must be one of"), ({**GOOD, "mode": None}, "must be one of"),
    ({"key": "/id", "mode": "newer_wins"}, "version: required"),
    ({**GOOD, "Key": "/id"}, "unknown field"), ({**GOOD, "a\r\nInjected: 1": 1}, "unknown field"),
    ({"key": "/id", "mode": "serial", "version": "/v"}, "only newer_wins"),
    ({"key": "/id", "mode": "serial", "version": None}, "only newer_wins"),
]


def test_every_refused_ordering_is_a_400_naming_it_and_changes_nothing(gw, gw_app):
    for bad, said in BAD:
        status, body, _ = gw.post("/v1/sources", {
            "name": "shop", "provider": "testing", "secrets": [SECRET],
            "destination": {"url": SINK, "ordering": bad}})
        assert status == 400, (bad, body)
        error = body["error"]
        assert error["code"] == "invalid_request" and error["details"] == {
            "field": "destination.ordering"}, error
        assert error["message"].startswith("destination.ordering"), error
        assert said in error["message"], (bad, error)
        assert "\r" not in error["message"] and "\n" not in error["message"]
        assert gw.get("/v1/sources/shop")[0] == 404  # no source was made

    create_source(gw, gw.token, SINK, destination={"url": SINK, "ordering": GOOD})
    before = _source(gw)
    for bad, said in BAD:
        status, body = _patch(gw, {"destination": {"url": "http://127.0.0.1:9/moved",
                                                   "ordering": bad}, "max_in_flight": 9})
        assert status == 400 and said in body["error"]["message"], (bad, body)
        assert body["error"]["details"]["field"] == "destination.ordering"
    assert _source(gw) == before and _stored(gw_app)["ordering"] == GOOD


def test_the_normal_form_reads_back_as_the_same_ordering():
    for given in (GOOD, {"key": "/", "mode": "newer_wins", "version": "/~0"},
                  {"key": "/id", "mode": "serial"}):
        parsed = route_specs.parse_ordering(given)
        assert route_specs.ordering_json(parsed) == given
        assert route_specs.parse_ordering(route_specs.ordering_json(parsed)) == parsed


def test_openapi_publishes_the_ordering_as_the_service_reads_it():
    body = jsonschema.Draft202012Validator(
        {"$ref": "#/components/schemas/Destination", "components": PUBLISHED})
    for good in (GOOD, None, {"key": "/", "mode": "newer_wins", "version": "/a/0"},
                 {"key": "/data/object/id", "mode": "serial"}):
        assert body.is_valid({"url": SINK, "ordering": good}), good
    for bad, _ in BAD:
        assert not body.is_valid({"url": SINK, "ordering": bad}), bad
    out = jsonschema.Draft202012Validator(
        {"$ref": "#/components/schemas/DestinationOut", "components": PUBLISHED})
    shown = {"url": SINK, "header_names": [], "has_secret": False, "timeout_seconds": 10,
             "retry_statuses": [], "delivered_header": None, "filter": None}
    assert out.is_valid({**shown, "ordering": GOOD}) and out.is_valid({**shown, "ordering": None})
    assert not out.is_valid(shown)


def test_the_command_line_sets_replaces_and_shows_the_ordering(database_url, gw_app, op):
    # each run is a process of its own (2 s): the API's refusals are tested above
    made = cli(database_url, "source", "create", "--tenant", "acme", "--name", "cli-shop",
               "--provider", "stripe", "--secret", "-", "--destination", SINK,
               "--ordering-key", "/data/object/id", "--ordering", "newer_wins",
               "--ordering-version", "/created", stdin="whsec_cli_ordering")
    assert made.returncode == 0, made.stderr
    assert _stored(gw_app, "cli-shop")["ordering"] == GOOD

    other = {"key": "/id", "mode": "newer_wins", "version": "/seq"}
    moved = cli(database_url, "source", "update", "cli-shop", "--tenant", "acme",
                "--destination", SINK, "--ordering", json.dumps(other))
    assert moved.returncode == 0, moved.stderr
    assert json.loads(moved.stdout)["destination"]["ordering"] == other
    for bad, said in ((["--ordering-key", "/id"], "give --ordering"),
                      (["--ordering", "serial", "--ordering-key", "/id",
                        "--ordering-version", "/v"], "only newer_wins")):
        refused = cli(database_url, "source", "update", "cli-shop", "--tenant", "acme",
                      "--destination", SINK, *bad)
        assert refused.returncode != 0 and said in refused.stderr, (bad, refused.stderr)
        assert "Traceback" not in refused.stderr
    assert _stored(gw_app, "cli-shop")["ordering"] == other
    serial = cli(database_url, "source", "update", "cli-shop", "--tenant", "acme",
                 "--destination", SINK, "--ordering", "serial", "--ordering-key", "/id")
    assert serial.returncode == 0, serial.stderr
    assert json.loads(serial.stdout)["destination"]["ordering"] == {"key": "/id",
                                                                    "mode": "serial"}
    cleared = cli(database_url, "source", "update", "cli-shop", "--tenant", "acme",
                  "--destination", SINK)
    assert cleared.returncode == 0
    assert json.loads(cleared.stdout)["destination"]["ordering"] is None
