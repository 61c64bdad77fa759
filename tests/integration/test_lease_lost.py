"""409 lease_lost says why (issue 25, a new user's stumble): the README's placeholder
`"lease_token": "lt_..."`, pasted as is, was told "replaced by a newer attempt or a
resolution", which sent the user looking for a second attempt that never was. A token that
never held the key, one that was replaced, one whose attempt was released and a lease ended
by a person each get their own message; the code and status stay 409 lease_lost (contract).
On both backends."""
from __future__ import annotations

import pytest

from tests.support import Http

REF = {"scope": "create_invoice", "key": "evt_881"}
RANDOM = "lt_Qm9yZ2V0LW1lLW5vdC10aGlzLWlzLWZha2U"  # well formed, never given to this key
CALLS = [("/v1/complete", {"state": "succeeded"}), ("/v1/release", {}),
         ("/v1/extend", {"lease_seconds": 60})]


@pytest.fixture
def op(app, tokens):
    return Http(app.test_client(), tokens["acme_operator"])


def claim(http, **over) -> str:
    status, body, _ = http.post("/v1/claim", {**REF, "payload": {"amount": 1250}, **over})
    assert status == 201, body
    return body["lease_token"]


def refused(http, path: str, extra: dict, token: str) -> str:
    status, body, _ = http.post(path, {**REF, "lease_token": token, **extra})
    assert (status, body["error"]["code"]) == (409, "lease_lost"), body
    assert len(token) <= 3 or token not in str(body)  # never a token in an answer
    return body["error"]["message"]


@pytest.mark.parametrize(("path", "extra"), CALLS)
@pytest.mark.parametrize("token", ["lt_...", "lt_", "x", "lt_" + "a" * 65, "LT_" + "A" * 30,
                                   "lt_Rk3\u00e9" + "a" * 20, "lt_...\r\nX: 1", "lt_" + "." * 250])
def test_the_readmes_placeholder_and_other_non_tokens_never_held_the_key(http, path, extra,
                                                                          token):
    """Not of the form a claim returns: it cannot have held any key, in any state."""
    claim(http)
    message = refused(http, path, extra, token)
    assert "never held" in message and "not a lease token" in message
    assert "replaced" not in message


@pytest.mark.parametrize(("path", "extra"), CALLS)
def test_a_well_formed_token_on_a_keys_only_attempt_never_held_it(http, path, extra):
    claim(http)
    message = refused(http, path, extra, RANDOM)
    assert "never held" in message and "replaced" not in message


def test_a_finished_first_attempt_still_tells_a_stranger_it_never_held_the_key(http):
    lease = claim(http)
    done = {**REF, "lease_token": lease, "state": "succeeded"}
    assert http.post("/v1/complete", done)[0] == 200
    assert "never held" in refused(http, "/v1/complete", {"state": "succeeded"}, RANDOM)


def test_a_token_replaced_by_a_newer_attempt_is_told_so(http):
    first = claim(http)
    assert http.post("/v1/release", {**REF, "lease_token": first})[0] == 200
    second = claim(http)  # attempt 2
    for path, extra in CALLS:
        message = refused(http, path, extra, first)
        assert "replaced by a newer attempt" in message and "attempt 2" in message
    assert http.post("/v1/complete", {**REF, "lease_token": second,
                                      "state": "succeeded"})[0] == 200


def test_a_released_attempts_own_token_is_told_it_was_released(http):
    lease = claim(http)
    assert http.post("/v1/release", {**REF, "lease_token": lease})[0] == 200
    for path, extra in (CALLS[0], CALLS[2]):  # a release again is 200 (idempotent)
        message = refused(http, path, extra, lease)
        assert "released" in message and "claim" in message and "never held" not in message


def test_a_lease_ended_by_a_persons_resolution_is_told_so(http, op, clock):
    lease = claim(http, lease_seconds=10)
    clock.advance(10)  # the lease ran out: the next claim opens a stale_lease review
    assert http.post("/v1/claim", {**REF, "payload": {"amount": 1250}})[0] == 409
    status, body, _ = op.post("/v1/resolve", {**REF, "action": "mark_failed"})
    assert status == 200, body
    message = refused(http, "/v1/complete", {"state": "succeeded"}, lease)
    assert "a person's resolution" in message and "never held" not in message
