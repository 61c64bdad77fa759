"""Bad input gets docs/api.md's 4xx in its envelope, and changes nothing in the database."""
from __future__ import annotations

import json

import pytest

from keystore_service.storage.tables import records

from .support import snapshot

GOOD = {"scope": "create_invoice", "key": "evt_1", "payload": {"amount": 1}}


def body(**changes):
    b = dict(GOOD)
    for k, v in changes.items():
        if v is ...:
            b.pop(k, None)
        else:
            b[k] = v
    return b


BAD_CLAIMS = [
    ("malformed JSON", b'{"scope": "a", "key": ', 400, "invalid_request"),
    ("not an object", b'["scope", "key"]', 400, "invalid_request"),
    ("empty body", b"", 400, "invalid_request"),
    ("not UTF-8", b'{"scope":"a","key":"\xff"}', 400, "invalid_request"),
    ("NaN in payload", b'{"scope":"a","key":"b","payload":NaN}', 400, "invalid_request"),
    ("duplicate names", b'{"scope":"a","key":"b","key":"c"}', 400, "invalid_request"),
    ("lone surrogate", b'{"scope":"a","key":"b","payload":"\\udfff"}', 400, "invalid_request"),
    ("scope missing", body(scope=...), 400, "invalid_request"),
    ("key missing", body(key=...), 400, "invalid_request"),
    ("key wrong type", body(key=123), 400, "invalid_request"),
    ("scope wrong type", body(scope=["a"]), 400, "invalid_request"),
    ("empty key", body(key=""), 400, "invalid_request"),
    ("513-character key", body(key="k" * 513), 400, "invalid_request"),
    ("control character in key", body(key="evt\n1"), 400, "invalid_request"),
    ("DEL in key", body(key="evt\x7f"), 400, "invalid_request"),
    ("C1 control in key", body(key="evt\x85"), 400, "invalid_request"),
    ("bad scope charset", body(scope="create invoice"), 400, "invalid_request"),
    ("scope too long", body(scope="s" * 129), 400, "invalid_request"),
    ("both payload and fingerprint", body(fingerprint="abc"), 400, "invalid_request"),
    ("fingerprint not printable", body(payload=None, fingerprint="a\tb"), 400, "invalid_request"),
    ("fingerprint too long", body(payload=..., fingerprint="f" * 257), 400, "invalid_request"),
    ("ttl 0", body(ttl_seconds=0), 400, "invalid_request"),
    ("ttl over the maximum", body(ttl_seconds=7_776_001), 400, "invalid_request"),
    ("ttl as a string", body(ttl_seconds="60"), 400, "invalid_request"),
    ("ttl as a float", body(ttl_seconds=60.5), 400, "invalid_request"),
    ("ttl as a boolean", body(ttl_seconds=True), 400, "invalid_request"),
    ("lease 0", body(lease_seconds=0), 400, "invalid_request"),
    ("lease over a day", body(lease_seconds=86_401), 400, "invalid_request"),
    ("unknown on_stale", body(on_stale="ignore"), 400, "invalid_request"),
    ("unknown field", body(ttl=60), 400, "invalid_request"),
    ("number beyond a double", b'{"scope":"a","key":"b","payload":1e400}', 400,
     "invalid_request"),
    ("huge integer", b'{"scope":"a","key":"b","payload":' + b"9" * 5000 + b"}", 400,
     "invalid_request"),
    ("oversize body", body(payload="x" * (1024 * 1024)), 413, "payload_too_large"),
    # Issue 13: valid RFC 3339 whose UTC instant is in the year 10000 or before year 1 was
    # stored, and every later answer about the record failed with 500.
    ("version after 9999 in UTC", body(version="9999-12-31T23:59:59-23:59"), 400,
     "invalid_request"),
    ("version before year 1 in UTC", body(version="0001-01-01T00:00:00+23:59"), 400,
     "invalid_request"),
    ("version with Arabic-Indic digits", body(version="٢٠٢٦-01-01T00:00:00Z"), 400,
     "invalid_request"),
    ("version with fullwidth digits", body(version="２０２６-01-01T00:00:00Z"), 400,
     "invalid_request"),
    ("version of 2^63", body(version=2**63), 400, "invalid_request"),
    ("negative version", body(version=-1), 400, "invalid_request"),
    ("fingerprint with a zero-width space", body(payload=..., fingerprint="fp\u200b"), 400,
     "invalid_request"),
    ("fingerprint with a line separator", body(payload=..., fingerprint="fp\u2028x"), 400,
     "invalid_request"),
    ("fingerprint with a private-use character", body(payload=..., fingerprint="\ue000"), 400,
     "invalid_request"),
]


@pytest.mark.parametrize("name,data,status,code", BAD_CLAIMS, ids=[c[0] for c in BAD_CLAIMS])
def test_bad_claims_are_refused_and_change_nothing(app, http, name, data, status, code):
    before = snapshot(app)
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    got, body_, _ = http.post("/v1/claim", raw=raw, headers={"Content-Type": "application/json"})
    assert (got, body_["error"]["code"]) == (status, code)
    assert set(body_["error"]) == {"code", "message", "details"}
    assert snapshot(app) == before


BAD_HOLDER_CALLS = [
    ("/v1/complete", {"lease_token": "lt", "state": "done"}),
    ("/v1/complete", {"lease_token": "lt", "state": "succeeded", "result": {"status_code": 99}}),
    ("/v1/complete", {"lease_token": "lt", "state": "succeeded", "result": {"extra": 1}}),
    ("/v1/complete", {"lease_token": "lt", "state": "succeeded",
                      "result": {"body": "x" * (256 * 1024)}}),
    ("/v1/complete", {"state": "succeeded"}),
    ("/v1/release", {"lease_token": "lt", "reason": "r" * 513}),
    ("/v1/release", {"lease_token": 5}),
    ("/v1/extend", {"lease_token": "lt"}),
    ("/v1/extend", {"lease_token": "lt", "lease_seconds": 0}),
    ("/v1/extend", {"lease_token": "lt", "lease_seconds": 5, "checkpoint": "c" * 129}),
    ("/v1/expire", {"key": ["evt_1"]}),
]


@pytest.mark.parametrize("path,extra", BAD_HOLDER_CALLS)
def test_bad_holder_calls_are_refused_and_change_nothing(app, http, tokens, path, extra):
    status, claimed, _ = http.post("/v1/claim", GOOD)
    assert status == 201
    before = snapshot(app)
    token = tokens["acme_operator"] if path == "/v1/expire" else ...
    status, body_, _ = http.post(path, {"scope": GOOD["scope"], "key": GOOD["key"], **extra},
                                 token=token)
    assert status == 400 and body_["error"]["code"] == "invalid_request"
    assert snapshot(app) == before


EDGE_VERSIONS = ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59"]


def test_a_batch_with_an_edge_version_is_refused_whole(app, http):
    before = snapshot(app)
    items = [{"key": "a", "version": 1}, {"key": "b", "version": EDGE_VERSIONS[0]},
             {"key": "c", "version": "2026-01-01T00:00:00Z"}]
    status, body_, _ = http.post("/v1/claim/batch", {"scope": "poll", "items": items})
    assert status == 400 and body_["error"]["code"] == "invalid_request"
    assert body_["error"]["details"]["errors"][0]["field"].startswith("items.1.version")
    assert snapshot(app) == before


@pytest.mark.parametrize("version", ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z",
                                     "0001-01-01T23:59:00+23:59", "9999-12-31T00:00:00-23:59"])
def test_the_first_and_last_instants_are_stored_and_shown(http, version):
    from keystore_service.domain import versions
    status, body_, _ = http.post("/v1/claim", body(version=version))
    assert status == 201, body_
    assert body_["record"]["version"] == versions.show(*versions.parse(version))
    status, body_, _ = http.get("/v1/keys", scope=GOOD["scope"], key=GOOD["key"])
    assert status == 200 and versions.parse(body_["record"]["version"]) == versions.parse(version)


def test_a_record_stored_before_the_range_check_still_answers(app, http, tokens):
    """A row written by v0.1.0 with an instant in the year 10000: lookups, claims and the
    review list answer instead of failing for the whole tenant."""
    status, _, _ = http.post("/v1/claim", body(version="2026-01-01T00:00:00Z"))
    assert status == 201
    engine = app.extensions["keystore"].database.engine
    with engine.begin() as conn:
        conn.execute(records.update().values(version=253_402_300_799_999_999 + 86_400_000_000))
    status, body_, _ = http.get("/v1/keys", scope=GOOD["scope"], key=GOOD["key"])
    assert status == 200 and body_["record"]["version"] == "10000-01-01T23:59:59.999999Z"
    status, body_, _ = http.post("/v1/claim", body(payload={"other": 1}))
    assert status == 422 and body_["record"]["version"].startswith("10000-")
    status, body_, _ = http.get("/v1/reviews", token=tokens["acme_operator"])
    assert status == 200 and len(body_["reviews"]) == 1


def test_error_messages_never_echo_the_payload(http):
    secret = "s3cr3t-payload-value"
    for raw in (b'{"scope":"a","key":"b","payload":{"x":"' + secret.encode() + b'"},"ttl":1}',
                b'{"scope":"a b","key":"' + secret.encode() + b'\\n"}'):
        _, body_, _ = http.post("/v1/claim", raw=raw)
        assert secret not in json.dumps(body_)


def test_integral_numbers_are_integers_as_json_says(http):
    status, body, _ = http.post("/v1/claim", {**GOOD, "ttl_seconds": 3600.0,
                                              "lease_seconds": 60.0})
    assert status == 201 and body["record"]["lease_expires_at"]
