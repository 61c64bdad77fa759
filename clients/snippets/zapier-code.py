# Idempotency Key Store: an exactly-once "Code by Zapier" step (Run Python).
# Input Data fields (Zapier passes every value as a string):
#   keystore_url    the key store, e.g. https://keystore.example.com
#   keystore_token  a client token
#   scope           the kind of operation, e.g. create_invoice
#   key             the stable id of the event: map the trigger's event id, never a value
#                   that changes per run (the Zap run id, a timestamp, a random id)
#   target_url      where action() below sends the request (replace action() as you need)
#   any other field is the payload: what the event says (a repeat must say the same)
# Output: {outcome: 'acquired' | 'replay', replayed, state, attempt, resource_id,
#          status_code, body}. A raised error stops the Zap run; with Autoreplay on, Zapier
#          runs the step again later with the same key, and the key store makes that safe.
# Guide: docs/platforms/zapier-code.md
import secrets
import time

import requests
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

CONFIG_FIELDS = ("keystore_url", "keystore_token", "scope", "key", "target_url")
LEASE_SECONDS = 60  # longer than the action ever takes
WAIT_SECONDS = 5  # the key store holds a duplicate this long for a first run still working


class TransientError(Exception):
    pass


# ---- THE ACTION: your side effect, done once per key -----------------------------------
# Return (state, result) with state "succeeded" or "failed" and result a dict of
# resource_id, status_code, body. Raise TransientError when it certainly did not happen
# (the key is released for the retry); any other error is an unknown outcome, left to the
# lease and a person.
def action(payload, idempotency_key):
    try:
        res = requests.post(input_data["target_url"], json=payload, timeout=20,
                            headers={"Idempotency-Key": idempotency_key})
    except requests.ConnectionError as exc:
        reason = getattr(exc.args[0], "reason", None) if exc.args else None
        if isinstance(reason, (NewConnectionError, ConnectTimeoutError)):
            raise TransientError("the target could not be reached")  # nothing was sent
        raise  # the connection broke after sending: did the target act? Unknown.
    if res.status_code in (408, 429) or res.status_code >= 500:
        raise TransientError("the target answered %d" % res.status_code)
    try:
        body = res.json()
    except ValueError:
        body = res.text
    result = {"status_code": res.status_code, "body": body}
    if isinstance(body, dict) and body.get("id") is not None:
        result["resource_id"] = str(body["id"])
    return ("succeeded" if res.status_code < 400 else "failed"), result


# ---- the protocol: nothing to edit below -----------------------------------------------
base = input_data["keystore_url"].rstrip("/")
session = requests.Session()
session.headers["Authorization"] = "Bearer " + input_data["keystore_token"]
scope, key = input_data["scope"], input_data.get("key") or ""
if not key:
    raise ValueError("the input field 'key' is empty: map the trigger's event id")
payload = {k: v for k, v in input_data.items() if k not in CONFIG_FIELDS}


def call(method, path, retries=0, wait=0, **kwargs):
    for attempt in range(retries + 1):
        try:  # the key store may hold a claim for `wait` seconds on purpose
            return session.request(method, base + path, timeout=15 + wait, **kwargs)
        except requests.RequestException:
            if attempt >= retries:  # only calls safe to repeat pass retries > 0
                raise
            time.sleep(0.5 * 2 ** attempt)


def refused(res):
    error = res.json().get("error", {})
    return RuntimeError("key store: %d %s %s" % (res.status_code, error.get("code"),
                                                 error.get("message")))


# One request: while another run holds the key, the key store waits for it (WAIT_SECONDS)
# and answers with its result. The claim proposes its own lease token (lt_ + 32 random
# characters); a claim that got no answer is sent once more with it, and if the lost one had
# acquired the key, the repeat resumes that attempt.
claim_body = {"scope": scope, "key": key, "payload": payload, "lease_seconds": LEASE_SECONDS,
              "lease_token": "lt_" + secrets.token_urlsafe(24)}
if WAIT_SECONDS > 0:
    claim_body["wait_seconds"] = WAIT_SECONDS
claim = call("POST", "/v1/claim", retries=1, wait=WAIT_SECONDS, json=claim_body)
body = claim.json()

record = body.get("record") or {}
if claim.status_code == 200:
    stored = record.get("result") or {}
    output = {"outcome": "replay", "replayed": True, "state": record["state"],
              "attempt": record["attempt"], "resource_id": stored.get("resource_id"),
              "status_code": stored.get("status_code"), "body": stored.get("body")}
elif claim.status_code == 201:
    lease = {"scope": scope, "key": key, "lease_token": body["lease_token"]}
    try:
        state, result = action(payload, "%s:%s" % (scope, key))
    except TransientError as exc:
        release = dict(lease, reason=str(exc))
        call("POST", "/v1/release", retries=3, json=release)
        raise RuntimeError("%s; %s/%s was released, a replay will run it again"
                           % (exc, scope, key))
    # any other error propagates: an unknown outcome, left to the lease and reconciliation
    completed = call("POST", "/v1/complete", retries=3,  # same token: safe to repeat
                     json=dict(lease, state=state, result=result))
    if completed.status_code != 200:
        raise refused(completed)
    output = dict({"outcome": "acquired", "replayed": False, "state": state,
                   "attempt": body["attempt"]}, **result)
elif claim.status_code == 409 and body.get("outcome") == "in_progress":  # try later
    raise RuntimeError("%s/%s is still in progress in another run; try again later"
                       % (scope, key))
elif claim.status_code == 409 and body.get("outcome") == "needs_reconciliation":
    raise RuntimeError("%s/%s: an earlier run ended with an unknown outcome; a person must "
                       "resolve it" % (scope, key))
elif claim.status_code == 422:
    raise RuntimeError("%s/%s was used before with different data; refused (not run)"
                       % (scope, key))
else:
    raise refused(claim)
