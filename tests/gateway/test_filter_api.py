"""A destination's filter through the API and the command line (issue 29, first part), on
both backends: what is given is stored and shown in route_specs' normal form, a PATCH of the
destination replaces it as it replaces the rest of the destination, and every filter
route_specs refuses is a 400 naming the field that changes nothing."""
from __future__ import annotations

import json

import jsonschema
import pytest

from keystore_service.domain import route_specs
from keystore_service.web.api.openapi import document

from .support import SECRET, cli, create_source

SINK = "http://127.0.0.1:9/hook"  # never reached: these tests forward nothing
BIG = 2 ** 63  # past a signed 64-bit integer: kept exact, as Python's json reads it
PUBLISHED = document()["components"]


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


def _refusal(given) -> str:
    with pytest.raises(route_specs.RouteError) as caught:
        route_specs.parse_filter(given, at="destination.filter")
    return str(caught.value)


def test_a_filter_is_stored_and_shown_in_its_normal_form(gw, gw_app):
    given = {"event_types": ["invoice.*", "facture.créée", "١٢٣.?"],
             "match": [{"pointer": "/data/object/amount", "equals": BIG},
                       {"pointer": "/données/١", "in": [-BIG - 1, "٤٢", None, {"a": [1.5]}]},
                       {"pointer": "/livemode", "exists": True}]}
    made = create_source(gw, gw.token, SINK, destination={"url": SINK, "filter": given})
    assert made["destination"]["filter"] == given
    assert _source(gw)["destination"]["filter"] == given
    assert gw.get("/v1/sources")[1]["sources"][0]["destination"]["filter"] == given
    assert _stored(gw_app)["filter"] == given
    assert _stored(gw_app)["filter"]["match"][0]["equals"] == BIG  # exact, not a double

    # only the parts given: an empty match is no part, {} takes every event
    status, body = _patch(gw, {"destination": {"url": SINK, "filter": {"match": []}}})
    assert status == 200, body
    assert body["source"]["destination"]["filter"] == {} == _stored(gw_app)["filter"]
    # another field's PATCH leaves the destination, and so its filter, as it is
    new = {"event_types": ["customer.*"]}
    assert _patch(gw, {"destination": {"url": SINK, "filter": new, "retry_statuses": [404],
                                       "delivered_header": "X-Done"}})[0] == 200
    assert _patch(gw, {"max_in_flight": 2})[0] == 200
    shown = _source(gw)["destination"]
    assert (shown["filter"], shown["retry_statuses"], shown["delivered_header"]) == (
        new, [404], "X-Done")
    # a destination without a filter (absent or null) has none: the key is not stored
    for cleared in ({"url": SINK}, {"url": SINK, "filter": None}):
        assert _patch(gw, {"destination": {"url": SINK, "filter": new}})[0] == 200
        status, body = _patch(gw, {"destination": cleared})
        assert status == 200 and body["source"]["destination"]["filter"] is None, body
        assert "filter" not in _stored(gw_app)


def test_a_source_without_a_filter_shows_null(gw, gw_app):
    assert create_source(gw, gw.token, SINK)["destination"]["filter"] is None
    assert "filter" not in _stored(gw_app)


LONG = "x" * 257
BAD = [
    [], "invoice.*", 1, True,  # not an object
    {"event_type": ["invoice.*"]}, {"Event_Types": []}, {"a\r\nInjected: 1": 1},  # unknown
    {"event_types": "invoice.*"}, {"event_types": []}, {"event_types": None},
    {"event_types": [f"t{i}" for i in range(21)]}, {"event_types": ["x"] * 5000},  # huge
    {"event_types": [""]}, {"event_types": ["a\r\nb"]}, {"event_types": ["a\x00b"]},
    {"event_types": ["a\x85"]}, {"event_types": [LONG]}, {"event_types": [1]},
    {"match": {}}, {"match": None}, {"match": [{"pointer": "/a", "exists": True}] * 11},
    {"match": ["/a"]}, {"match": [{"equals": 1}]}, {"match": [{"pointer": 1, "equals": 1}]},
    {"match": [{"pointer": "a", "equals": 1}]}, {"match": [{"pointer": "/~2", "equals": 1}]},
    {"match": [{"pointer": "/" + LONG, "equals": 1}]}, {"match": [{"pointer": "/a"}]},
    {"match": [{"pointer": "/a", "equals": 1, "in": [1]}]},
    {"match": [{"pointer": "/a", "exists": "yes"}]}, {"match": [{"pointer": "/a", "exists": 1}]},
    {"match": [{"pointer": "/a", "in": []}]}, {"match": [{"pointer": "/a", "in": 1}]},
    {"match": [{"pointer": "/a", "in": list(range(101))}]},
    {"match": [{"pointer": "/a", "equals": "x" * 1100}]},
    {"match": [{"pointer": "/a", "in": [1, "x" * 1100]}]},
    {"match": [{"pointer": "/a", "equals": 1, "not": 2}]},
    {"match": [{"pointer": "/a", "equals": {"deep": [[[[[[[[0]]]]]]]] * 120}}]},
]


@pytest.mark.parametrize("bad", BAD, ids=range(len(BAD)))
def test_every_refused_filter_is_a_400_naming_it_and_changes_nothing(gw, gw_app, bad):
    message = _refusal(bad)
    status, body, _ = gw.post("/v1/sources", {
        "name": "shop", "provider": "testing", "secrets": [SECRET],
        "destination": {"url": SINK, "filter": bad}})
    assert status == 400, body
    assert body["error"] == {"code": "invalid_request", "message": message,
                             "details": {"field": "destination.filter"}}
    assert message.startswith("destination.filter") and "\r" not in message
    assert "\n" not in message and "\x00" not in message
    assert gw.get("/v1/sources/shop")[0] == 404  # no source was made

    create_source(gw, gw.token, SINK, destination={"url": SINK, "retry_statuses": [404],
                                                   "filter": {"event_types": ["a.*"]}})
    before = _source(gw)
    status, body = _patch(gw, {"destination": {"url": "http://127.0.0.1:9/moved",
                                               "filter": bad}, "max_in_flight": 9})
    assert status == 400 and body["error"]["message"] == message, body
    assert _source(gw) == before  # the URL, the other fields and the filter as they were
    assert _stored(gw_app)["filter"] == {"event_types": ["a.*"]}


def test_what_is_no_json_is_refused_before_the_filter_is_read(gw):
    for raw in ('{"name": "shop", "provider": "testing", "secrets": ["%s"], "destination": '
                '{"url": "%s", "filter": {"match": [{"pointer": "/n", "equals": %s}]}}}'
                % (SECRET, SINK, value) for value in ("١٢", "NaN", '"\\ud800"')):
        status, body, _ = gw.post("/v1/sources", raw=raw.encode(),
                                  headers={"Content-Type": "application/json"})
        assert status == 400 and body["error"]["code"] == "invalid_request", body
    assert gw.get("/v1/sources/shop")[0] == 404


def test_the_normal_form_reads_back_as_the_same_filter():
    for given in ({}, {"match": []}, {"event_types": ["*"]},
                  {"match": [{"pointer": "", "exists": False},
                             {"pointer": "/a~1b", "in": [BIG, 1.5, "x", None, [1], {"k": 1}]},
                             {"pointer": "/n", "equals": {"nested": [True, None]}}]}):
        parsed = route_specs.parse_filter(given)
        normal = route_specs.filter_json(parsed)
        assert route_specs.parse_filter(normal) == parsed
        assert route_specs.filter_json(route_specs.parse_filter(normal)) == normal
        assert json.loads(json.dumps(normal)) == normal  # plain JSON: lists, not tuples


def _validator(model: str):
    return jsonschema.Draft202012Validator(
        {"$ref": f"#/components/schemas/{model}", "components": PUBLISHED})


def test_openapi_publishes_the_filter_as_the_service_reads_it():
    """Every filter the service takes is valid by /openapi.json, and every one it refuses is
    invalid there too, but for a value's size in bytes (said in the description)."""
    body = _validator("Destination")
    for good in ({}, {"event_types": ["invoice.*"]},
                 {"match": [{"pointer": "", "exists": True}, {"pointer": "/a", "equals": None},
                            {"pointer": "/b", "in": [BIG, "x"]}]}, None):
        assert body.is_valid({"url": SINK, "filter": good}), good
    for bad in BAD:
        sized = "bytes of JSON" in _refusal(bad)
        assert body.is_valid({"url": SINK, "filter": bad}) == sized, bad
    assert "1,024 bytes" in PUBLISHED["schemas"]["Destination"]["properties"]["filter"][
        "anyOf"][0]["description"]
    out = _validator("DestinationOut")
    shown = {"url": SINK, "header_names": [], "has_secret": False, "timeout_seconds": 10,
             "retry_statuses": [], "delivered_header": None, "ordering": None}
    assert out.is_valid({**shown, "filter": {"event_types": ["a"]}})
    assert out.is_valid({**shown, "filter": None}) and not out.is_valid(shown)


def test_the_command_line_sets_replaces_and_shows_the_filter(database_url, gw_app, op):
    wanted = {"event_types": ["invoice.*"], "match": [{"pointer": "/amount", "in": [BIG]}]}
    made = cli(database_url, "source", "create", "--tenant", "acme", "--name", "cli-shop",
               "--provider", "stripe", "--secret", "-", "--destination", SINK,
               "--filter", json.dumps(wanted), stdin="whsec_cli_filter")
    assert made.returncode == 0, made.stderr
    shown = cli(database_url, "source", "show", "--tenant", "acme", "cli-shop")
    assert json.loads(shown.stdout)["destination"]["filter"] == wanted

    moved = cli(database_url, "source", "update", "cli-shop", "--tenant", "acme",
                "--destination", SINK, "--retry-status", "404",
                "--filter", '{"event_types": ["customer.created"], "match": []}')
    assert moved.returncode == 0, moved.stderr
    dest = json.loads(moved.stdout)["destination"]
    assert dest["filter"] == {"event_types": ["customer.created"]}
    assert dest["retry_statuses"] == [404]
    cleared = cli(database_url, "source", "update", "cli-shop", "--tenant", "acme",
                  "--destination", SINK)
    assert cleared.returncode == 0 and json.loads(cleared.stdout)["destination"]["filter"] is None

    for bad, said in (('{"event_types": ["a\\r\\nInjected: 1"]}', "destination.filter."
                       "event_types[0]: a glob is 1 or more characters"),
                      ('{"match": [{"pointer": "/n", "equals": ١}]}', "not JSON"),
                      ('{"event_types": []', "not JSON"),
                      ('{"match": [], "match": []}', "duplicate member name")):
        refused = cli(database_url, "source", "update", "cli-shop", "--tenant", "acme",
                      "--destination", SINK, "--filter", bad)
        assert refused.returncode != 0 and said in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr and "Injected" not in refused.stderr
    gone = cli(database_url, "source", "update", "none", "--tenant", "acme",
               "--destination", SINK)
    assert gone.returncode == 1 and "no source named 'none'" in gone.stderr
    assert json.loads(cli(database_url, "source", "show", "--tenant", "acme",
                          "cli-shop").stdout)["destination"]["filter"] is None
