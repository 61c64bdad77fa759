"""A destination's rate through the API and the command line (issue 29, "Rates per
destination"), on both backends: stored and shown in its normal form, with the interval the
take reads (hook_destinations.rate_interval_us); a PATCH of the destination replaces it; every
rate route_specs refuses is a 400 naming the field that changes nothing."""
from __future__ import annotations

import json

import jsonschema
import pytest
from keystore_service.web.api.openapi import document

from .support import SECRET, cli, create_source

SINK = "http://127.0.0.1:9/hook"  # never reached: these tests forward nothing
PUBLISHED = document()["components"]


def _source(gw, name="shop"):
    status, body, _ = gw.get(f"/v1/sources/{name}")
    assert status == 200, body
    return body["source"]


def _patch(gw, body, name="shop"):
    r = gw.client.patch(f"/v1/sources/{name}", json=body, headers=gw._auth(...))
    return r.status_code, r.get_json(silent=True)


def _stored(gw_app, name="shop") -> tuple:
    """The rate in the options, and the take's columns (interval, debt)."""
    ks = gw_app.extensions["keystore"]
    source = ks.gateway.sources.get(ks.accounts.tenant_id("acme"), name).source
    return source.options["forward"].get("rate"), source.rate_interval_us, source.rate_tat


def test_a_rate_is_stored_and_shown_with_its_interval(gw, gw_app):
    made = create_source(gw, gw.token, SINK, destination={"url": SINK,
                                                          "rate": {"per_second": 5}})
    assert made["destination"]["rate"] == {"per_second": 5}
    assert _source(gw)["destination"]["rate"] == {"per_second": 5}
    assert gw.get("/v1/sources")[1]["sources"][0]["destination"]["rate"] == {"per_second": 5}
    assert _stored(gw_app) == ({"per_second": 5}, 200_000, None)
    for rate, interval in (({"per_minute": 30}, 2_000_000), ({"per_second": 7}, 142_858),
                           ({"per_second": 4.0}, 250_000),  # 4.0 is 4, as every Int reads it
                           ({"per_minute": 1}, 60_000_000), ({"per_second": 1_000_000}, 1)):
        status, body = _patch(gw, {"destination": {"url": SINK, "rate": rate}})
        assert status == 200 and body["source"]["destination"]["rate"] == rate, body
        assert _stored(gw_app) == (rate, interval, None)
        assert all(type(n) is int for n in _stored(gw_app)[0].values())
    # another field's PATCH leaves the destination, and so its rate, as it is
    assert _patch(gw, {"max_in_flight": 2})[0] == 200
    assert _source(gw)["destination"]["rate"] == {"per_second": 1_000_000}
    for cleared in ({"url": SINK}, {"url": SINK, "rate": None}):
        assert _patch(gw, {"destination": {"url": SINK, "rate": {"per_second": 3}}})[0] == 200
        status, body = _patch(gw, {"destination": cleared})
        assert status == 200 and body["source"]["destination"]["rate"] is None, body
        assert _stored(gw_app) == (None, None, None)


def test_a_source_without_a_rate_shows_null(gw, gw_app):
    assert create_source(gw, gw.token, SINK)["destination"]["rate"] is None
    assert _stored(gw_app) == (None, None, None)


BAD = [
    ({"per_second": 0}, "destination.rate.per_second: must be between 1 and 1_000_000, not 0"),
    ({"per_second": -1}, "destination.rate.per_second: must be between 1 and 1_000_000, not -1"),
    ({"per_minute": 2 ** 63}, "destination.rate.per_minute: must be between 1 and 1_000_000"),
    ({"per_second": 1_000_001}, "destination.rate.per_second: must be between 1 and 1_000_000"),
    ({"per_second": 1.5}, "destination.rate.per_second: must be a whole number"),
    ({"per_second": True}, "destination.rate.per_second: must be a whole number"),
    ({"per_second": "5"}, "destination.rate.per_second: must be a whole number"),
    ({"per_second": None}, "destination.rate.per_second: must be a whole number"),
    ({"per_second": 1, "per_minute": 1}, "destination.rate: give exactly one of per_second, "
                                         "per_minute, not per_second and per_minute"),
    ({}, "destination.rate: give exactly one of per_second, per_minute, not none"),
    ({"per_hour": 5}, 'destination.rate: unknown field "per_hour"'),
    ({"per_second": 5, "burst": 10}, 'destination.rate: unknown field "burst"'),
    (5, "destination.rate: must be an object"), ("10/s", "destination.rate: must be an object"),
    (True, "destination.rate: must be an object"), ([5], "destination.rate: must be an object"),
]


def test_every_refused_rate_is_a_400_naming_it_and_changes_nothing(gw, gw_app):
    def refused(status, body, said) -> None:
        assert status == 400, body
        assert body["error"]["code"] == "invalid_request"
        assert body["error"]["message"].startswith(said), body
        assert body["error"]["details"] == {"field": "destination.rate"}
    for bad, said in BAD:
        status, body, _ = gw.post("/v1/sources", {
            "name": "shop", "provider": "testing", "secrets": [SECRET],
            "destination": {"url": SINK, "rate": bad}})
        refused(status, body, said)
        assert gw.get("/v1/sources/shop")[0] == 404  # no source was made

    create_source(gw, gw.token, SINK, destination={"url": SINK, "rate": {"per_minute": 90}})
    before, stored = _source(gw), _stored(gw_app)
    for bad, said in BAD:
        status, body = _patch(gw, {"destination": {"url": "http://127.0.0.1:9/moved",
                                                   "rate": bad}, "max_in_flight": 9})
        refused(status, body, said)
        assert _source(gw) == before and _stored(gw_app) == stored == (
            {"per_minute": 90}, 666_667, None)


def test_openapi_publishes_the_rate_as_the_service_reads_it():
    body = jsonschema.Draft202012Validator(
        {"$ref": "#/components/schemas/Destination", "components": PUBLISHED})
    for good in ({"per_second": 1}, {"per_minute": 1_000_000}, None):
        assert body.is_valid({"url": SINK, "rate": good}), good
    for bad, _ in BAD:
        assert not body.is_valid({"url": SINK, "rate": bad}), bad
    assert "rate" in PUBLISHED["schemas"]["DestinationOut"]["properties"]


def test_the_command_line_sets_replaces_and_shows_the_rate(database_url, gw_app, op):
    made = cli(database_url, "source", "create", "--tenant", "acme", "--name", "cli-shop",
               "--provider", "stripe", "--secret", "-", "--destination", SINK,
               "--rate", "10/s", stdin="whsec_cli_rate")
    assert made.returncode == 0, made.stderr
    ks = gw_app.extensions["keystore"]
    assert ks.gateway.sources.get(ks.accounts.tenant_id("acme"), "cli-shop").source.options[
        "forward"]["rate"] == {"per_second": 10}
    moved = cli(database_url, "source", "update", "cli-shop", "--tenant", "acme",
                "--destination", SINK, "--rate", "600/min")
    assert moved.returncode == 0, moved.stderr
    assert json.loads(moved.stdout)["destination"]["rate"] == {"per_minute": 600}
    for bad, said in (("1.5/s", "a rate is N/s or N/min"),
                      ("0/s", "destination.rate.per_second: must be between 1 and")):
        refused = cli(database_url, "source", "update", "cli-shop", "--tenant", "acme",
                      "--destination", SINK, "--rate", bad)
        assert refused.returncode != 0 and said in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
    cleared = cli(database_url, "source", "update", "cli-shop", "--tenant", "acme",
                  "--destination", SINK)
    assert cleared.returncode == 0 and json.loads(cleared.stdout)["destination"]["rate"] is None


def test_the_rate_option_reads_n_per_second_or_per_minute():
    from click import BadParameter

    from keystore_service.cli.source_options import _rate_option
    assert _rate_option("10/s") == {"per_second": 10}
    assert _rate_option(" 600/min ") == {"per_minute": 600}
    for bad in ("10", "10/h", "-1/s", "1.5/s", "10 / s", "/s", "10/S", "١٠/s"):
        with pytest.raises(BadParameter):
            _rate_option(bad)
