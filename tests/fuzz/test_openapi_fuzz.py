"""Schemathesis against /openapi.json: no 5xx, no response that breaks the schema, and no
change to the database from a refused request; then the stateful run, which follows the
document's links from a claim to complete / release / extend with real lease tokens.

CI runs a fixed seed (the same requests every run). A nightly-style run rotates it and sends
more, as docs/reliability.md says:
    KEYSTORE_FUZZ_SEED=$(date +%Y%m%d) KEYSTORE_FUZZ_EXAMPLES=1000 \
        .venv/bin/python -m pytest tests/fuzz
A failure prints the seed; the same two variables repeat the run exactly."""
from __future__ import annotations

import os

import hypothesis
import jsonschema
import pytest
import schemathesis
from hypothesis import HealthCheck
from schemathesis.specs.openapi.checks import positive_data_acceptance
from sqlalchemy import func, select

from keystore_service.app import create_app
from keystore_service.settings import Settings
from keystore_service.storage import migrate
from keystore_service.storage.tables import attempts, records, resolutions, reviews, tenants, tokens
from keystore_service.web.api.openapi import document
from tests.support import T0

# Per operation (60 before issue 13). 200 covers every branch the schema describes in
# about half a minute here; the nightly run raises it.
EXAMPLES = int(os.environ.get("KEYSTORE_FUZZ_EXAMPLES", "200"))
SEED = int(os.environ.get("KEYSTORE_FUZZ_SEED", "20261130"))  # CI's fixed seed
REFUSED = {400, 401, 403, 404, 405, 413}  # 409/422 answers write by contract (counts, reviews)
# Schemathesis's own pytest plugin does not load under pytest 9 yet (it reads a private
# attribute pytest 9 removed), so each operation's strategy is driven with Hypothesis here.


@pytest.fixture(scope="module")
def fuzz_app(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('fuzz')}/keystore.db"
    migrate.upgrade(url)
    # No seats for waiting: a generated `wait=30` on a running claim would sleep 30 s per
    # example; the lookup then answers at once, as it does past its seats (tests/e2e).
    app = create_app(Settings(database_url=url, wait_share=0,
                              secret_key="cNk6cVlTCFCk0NKWaFUBSi1_dBbOG9Z-mUbGkN9yQBw="))
    ks = app.extensions["keystore"]
    ks.accounts.create_tenant("fuzz", T0)
    app.config["fuzz_token"] = ks.accounts.create_token("fuzz", "operator", None, T0)
    yield app
    ks.database.engine.dispose()


def operations(app) -> list:
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    return [result.ok() for result in schema.get_all_operations()]


SPEC = document()


def truly_valid(case) -> bool:
    """The generated body really conforms to the published request schema. Schemathesis's
    positive mode sometimes breaks a `pattern` inside `anyOf` beside a `not` (a fingerprint
    with a control character, seen with 4.32.5); such a request is not schema-valid, and its
    400 is right."""
    body_schema = case.operation.definition.raw.get("requestBody")
    if not body_schema or not isinstance(case.body, dict):
        return True
    ref = body_schema["content"]["application/json"]["schema"]
    validator = jsonschema.Draft202012Validator({**ref, "components": SPEC["components"]})
    return validator.is_valid(case.body)


def database_state(app) -> tuple:
    with app.extensions["keystore"].database.engine.connect() as conn:
        return tuple(conn.execute(select(func.count(), *extra).select_from(t)).one()
                     for t, extra in ((records, [func.sum(records.c.duplicate_count),
                                                 func.max(records.c.last_seen_at)]),
                                      (attempts, []), (reviews, [func.sum(reviews.c.count)]),
                                      (resolutions, []), (tenants, []), (tokens, [])))


def test_every_operation_is_fuzzed(fuzz_app):
    assert {(op.method.upper(), op.path) for op in operations(fuzz_app)} >= {
        ("POST", "/v1/claim"), ("POST", "/v1/claim/batch"), ("POST", "/v1/complete"),
        ("POST", "/v1/release"), ("POST", "/v1/extend"), ("POST", "/v1/expire"),
        ("GET", "/v1/keys"), ("GET", "/v1/reviews"), ("POST", "/v1/resolve"),
        ("GET", "/v1/report"), ("GET", "/v1/whoami")}
    assert len(operations(fuzz_app)) == OPERATIONS


# Every operation of the document gets one run of the test below.
OPERATIONS = sum(len(ops) for ops in document()["paths"].values())
# Refusals no schema can foresee, by operation and field (a field, or one inside it): what
# depends on stored state or on a value's randomness or on arithmetic between two fields,
# each said in its field's description in /openapi.json. Everything else a schema-valid
# request can be refused for is in the schema (issue 25, item 12: a provider's secrets, a
# destination's header names, redeliver outside hook: scopes were not).
# A proposed lease token that is a constant (lt_000...: not random, which a pattern cannot say)
_PROPOSED = ("lease_token", "items.lease_token")
SEMANTIC = {
    "/v1/claim": _PROPOSED, "/v1/claim/batch": _PROPOSED,
    # a page cursor of the right shape that the service never gave out
    "/v1/reviews": ("cursor",), "/v1/deliveries": ("cursor",),
    # a taken name; a destination URL refused by the address rules (gateway/destinations.py:
    # what a name resolves to, and the URL shape they check first, not yet in the schema);
    # a TTL shorter than retry_window_seconds plus a day (two fields compared); a filter's
    # value over 1,024 bytes of compact JSON (a length no schema of any JSON value can say);
    # each of those for a destination of `destinations`, and a name given twice there
    "POST /v1/sources": ("name", "destination.url", "ttl_seconds", "destination.filter",
                         "destinations"),
    # the same, and the stored source's provider rules (secrets, generic options)
    # and a list of destinations without the source's first, or without one that has
    # deliveries (stored state)
    "PATCH /v1/sources/{name}": ("destination.url", "ttl_seconds", "secrets", "signature",
                                 "event_id", "destination.filter", "destinations"),
    # a pause's end in the past or over a year ahead (the time, which no schema knows)
    "POST /v1/sources/{name}/pause": ("until",),
    # a taken name; a URL refused by the address rules; email without KEYSTORE_SMTP_URL
    "POST /v1/alert-channels": ("name", "url", "to"),
    # the stored channel's kind: a url or secret for email, a to or secret for slack
    "PATCH /v1/alert-channels/{name}": ("url", "secret", "to"),
    # a time range whose received_before is not after its received_after (two fields)
    "POST /v1/deliveries/bulk": ("filter",),
    # a taken name; a base URL refused by the address rules; a header named twice in two
    # cases, or named as the idempotency_header (two fields)
    "POST /v1/connections": ("name", "base_url", "headers"),
    "PATCH /v1/connections/{name}": ("base_url", "headers"),
    # a connection the tenant does not have (stored state)
    "PUT /v1/scopes/{scope}/settlement": ("connection",),
    # a send's path with // or a dot segment, a header its connection sets itself, bad
    # base64, a payload that cannot be canonicalised (gateway/sending.py's rules)
    "POST /v1/send": ("request.path", "request.headers", "request.body_base64", "payload",
                      "resource_id_pointer"),
}


def _semantic(case, details: dict) -> bool:
    """The 400 is one of SEMANTIC's for this operation."""
    op = case.operation
    allowed = SEMANTIC.get(f"{op.method.upper()} {op.path}", SEMANTIC.get(op.path, ()))
    fields = [str(details.get("field", ""))] + [str(e.get("field", ""))
                                                 for e in details.get("errors", [])]
    # "items.3.lease_token" is items.lease_token; "secrets.0" is inside secrets
    fields = [".".join(p for p in f.split(".") if not p.isdigit()) for f in fields if f]
    return any(f == a or f.startswith(a + ".") for f in fields for a in allowed)


@pytest.mark.parametrize("index", range(OPERATIONS))
def test_the_api_holds_its_contract_under_fuzzing(fuzz_app, index):
    ops = operations(fuzz_app)
    token = fuzz_app.config["fuzz_token"]
    counted = {"refused": 0, "answered": 0}

    @hypothesis.seed(SEED + index)
    @hypothesis.given(case=ops[index].as_strategy())
    @hypothesis.settings(max_examples=EXAMPLES, deadline=None,
                         suppress_health_check=list(HealthCheck), database=None)
    def fuzz(case):
        before = database_state(fuzz_app)
        headers = {"Authorization": f"Bearer {token}"}
        response = case.call(headers=headers)
        # Every check but "schema-valid data is accepted", which is checked below with the
        # two state-dependent 400s the schema cannot know about allowed: a version of the
        # other kind than the stored record's, and a page cursor the service never gave out.
        case.validate_response(response, headers=headers,
                               excluded_checks=[positive_data_acceptance])
        if case.meta.generation.mode.is_positive and response.status_code == 400 \
                and truly_valid(case):
            details = response.json()["error"]["details"]
            field = str(details.get("field", ""))
            assert (field == "version" and "stored_kind" in details) or \
                _semantic(case, details), f"a schema-valid request was refused: {details}"
        assert response.status_code < 500
        if response.status_code in REFUSED:
            counted["refused"] += 1
            assert database_state(fuzz_app) == before, "a refused request changed the database"
        else:
            counted["answered"] += 1
    fuzz()
    assert counted["refused"] + counted["answered"] > 0


def test_stateful_sequences_reach_the_holders_calls_with_real_tokens(fuzz_app):
    """Schemathesis follows the links of /openapi.json: a claim's 201 gives its lease token
    to complete / release / extend, its 409 and 422 lead to lookups and resolutions. The
    holder's calls must answer 200 with a real token at least sometimes (with made-up tokens
    they can only ever answer 404 or 409)."""
    token = fuzz_app.config["fuzz_token"]
    # The operations the claim's links join: the others (sources, deliveries) have no links
    # and only dilute the sequences (with the gateway's dozen beside them, a run of 20
    # sequences once reached no release with a real token); the test above fuzzes them.
    schema = schemathesis.openapi.from_wsgi("/openapi.json", fuzz_app).include(
        path_regex=r"^/v1/(claim|complete|release|extend|expire|keys|resolve)$")
    # Valid sequences only: a link fills a step's body from the step before, which can turn
    # a body generated invalid ("random bytes") into a valid one that schemathesis still
    # calls negative (seen once: a release answered 200 was "schema-violating request
    # accepted"). Invalid data is the test above's, one operation at a time.
    schema.config.generation.update(modes=[schemathesis.GenerationMode.POSITIVE])
    seen: dict = {}

    class Sequences(schema.as_state_machine()):
        def setup(self):
            """Each sequence starts from an empty store: Hypothesis replays a sequence to
            shrink it, and a record left by the last one would change its answers."""
            with fuzz_app.extensions["keystore"].database.engine.begin() as conn:
                for table in (attempts, reviews, resolutions, records):
                    conn.execute(table.delete())

        def get_call_kwargs(self, case):
            return {"headers": {"Authorization": f"Bearer {token}"}}

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            case.validate_response(response, headers=self.get_call_kwargs(case)["headers"],
                                   excluded_checks=[positive_data_acceptance])
            assert response.status_code < 500
            seen.setdefault((case.operation.path, response.status_code), 0)
            seen[(case.operation.path, response.status_code)] += 1

    hypothesis.seed(SEED)(Sequences)
    schemathesis.generation.stateful.run_state_machine_as_test(
        Sequences, settings=hypothesis.settings(
            max_examples=max(20, EXAMPLES // 5), stateful_step_count=6, deadline=None,
            suppress_health_check=list(HealthCheck), database=None))
    answered = {path for (path, status) in seen if status == 200}
    assert {"/v1/complete", "/v1/release", "/v1/extend"} <= answered, seen
