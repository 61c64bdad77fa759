"""The published schemas against the service (issue 25, item 12): a request is valid by
/openapi.json exactly when the service does not refuse it with 400, for the three kinds of
request Schemathesis found refused although schema-valid: a provider's secrets and options
(POST /v1/sources), a destination's header names (PATCH too), and redeliver / release by
scope (POST /v1/resolve). tests/fuzz covers the same with generated requests."""
from __future__ import annotations

import base64

import jsonschema
import pytest

from keystore_service.web.api.openapi import document
from tests.support import Http

SPEC = document()


@pytest.fixture
def op(app, tokens):
    """An operator's calls (sources and resolutions are the operator's)."""
    return Http(app.test_client(), tokens["acme_operator"])


def patch(op: Http, path: str, body: dict) -> tuple[int, dict]:
    r = op.client.patch(path, json=body, headers=op._auth(...))
    return r.status_code, r.get_json(silent=True)


def valid(body: dict, model: str) -> bool:
    schema = {"$ref": f"#/components/schemas/{model}", "components": SPEC["components"]}
    return jsonschema.Draft202012Validator(schema).is_valid(body)


DEST = {"url": "http://127.0.0.1:5678/webhook/x"}
STRIPE = "whsec_test_k8Q2sXv"  # "_": not base64, so not a standard secret
STANDARD = "whsec_" + base64.b64encode(bytes(range(24))).decode()


@pytest.mark.parametrize(("body", "ok"), [
    ({"provider": "stripe", "secrets": [STRIPE]}, True),
    ({"provider": "stripe"}, False),  # a provider that signs needs its secret
    ({"provider": "stripe", "secrets": None}, False),
    ({"provider": "stripe", "secrets": ["sk_live_1"]}, False),  # not whsec_
    ({"provider": "github", "secrets": [" padded "]}, False),  # pasted with spaces
    ({"provider": "github", "secrets": ["s3cret"], "signature": None}, True),
    ({"provider": "github", "secrets": ["s3cret"], "event_id": {"header": "X-Id"}}, False),
    ({"provider": "standard", "secrets": [STANDARD]}, True),
    ({"provider": "standard", "secrets": [STRIPE]}, False),  # not base64 of 24-64 bytes
    ({"provider": "generic", "event_id": {"header": "X-Id"}}, True),  # unsigned
    ({"provider": "generic", "event_id": {"header": "X-Id"}, "secrets": ["s"]}, False),
    ({"provider": "generic", "event_id": {"json": ["/a", "/b"]},
      "signature": {"header": "X-Sig"}, "secrets": ["s"]}, True),
    ({"provider": "generic", "event_id": {"json": ["/a"]},
      "signature": {"header": "X-Sig"}}, False),  # signed without a secret
    ({"provider": "generic"}, False),  # no event_id rule
    ({"provider": "generic", "event_id": {}}, False),
    ({"provider": "generic", "event_id": {"header": "X-Id", "json": ["/a"]}}, False),
    ({"provider": "generic", "event_id": {"json": ["/a", "/a"]}}, False),
    ({"provider": "generic", "event_id": {"json": ["/a\u0001"]}}, False),
    ({"provider": "nobody", "secrets": ["s"]}, False),
])
def test_the_per_provider_schemas_say_what_the_service_checks(op, body, ok):
    """Each case against the published schema and against the service: valid exactly when
    created (201), and refused with 400 when not."""
    body = {"name": f"s{abs(hash(repr(body))) % 10**9}", "destination": DEST, **body}
    assert valid(body, "SourceCreate") == ok
    status, answer, _ = op.post("/v1/sources", body)
    assert status == (201 if ok else 400), answer


@pytest.mark.parametrize(("headers", "ok"), [
    ({"X-Api-Key": "k"}, True),
    ({"authorization": "Bearer x"}, True),
    ({"Idempotency-Key": "x"}, False),  # the gateway's own, in any case
    ({"HOST": "x"}, False),
    ({"webhook-SIGNATURE": "x"}, False),
    ({"Bad Name": "x"}, False),  # not a token
    ({"X-Ok": "line\r\nX-Injected: 1"}, False),  # a value with CR/LF
])
def test_destination_header_names_in_the_schema_and_the_service(op, headers, ok):
    created = {"name": "hdr", "provider": "generic", "event_id": {"header": "X-Id"},
               "destination": DEST}
    assert op.post("/v1/sources", created)[0] == 201
    change = {"destination": {**DEST, "headers": headers}}
    assert valid(change, "SourceChange") == ok
    status, answer = patch(op, "/v1/sources/hdr", change)
    assert status == (200 if ok else 400), answer
    assert valid({**created, "name": "hdr2", **change}, "SourceCreate") == ok
    assert op.post("/v1/sources", {**created, "name": "hdr2", **change})[0] == \
        (201 if ok else 400)


@pytest.mark.parametrize(("scope", "action", "ok"), [
    ("create_invoice", "redeliver", False),  # redeliver is for the gateway's records
    ("hook:stripe", "release", False),  # it would let the provider's resend in again
    ("hook:stripe", "redeliver", True),
    ("hook:stripe", "dismiss", True),
    ("create_invoice", "release", True),
    ("create_invoice", "mark_failed", True),
])
def test_resolve_actions_by_scope_in_the_schema_and_the_service(op, scope, action, ok):
    """Valid by the schema exactly when the service takes it past validation: a record that
    does not exist then answers 404, never 400."""
    body = {"scope": scope, "key": "evt_1", "action": action}
    assert valid(body, "ResolveRequest") == ok
    status, answer, _ = op.post("/v1/resolve", body)
    assert status == (404 if ok else 400), answer
