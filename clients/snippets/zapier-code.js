// Idempotency Key Store: an exactly-once "Code by Zapier" step (Run JavaScript).
// Input Data fields (Zapier passes every value as a string):
//   keystore_url    the key store, e.g. https://keystore.example.com
//   keystore_token  a client token
//   scope           the kind of operation, e.g. create_invoice
//   key             the stable id of the event: map the trigger's event id, never a value
//                   that changes per run (the Zap run id, a timestamp, a random id)
//   target_url      where action() below sends the request (replace action() as you need)
//   any other field is the payload: what the event says (a repeat must say the same)
// Output: {outcome: 'acquired' | 'replay', replayed, state, attempt, resource_id,
//          status_code, body}. A thrown error stops the Zap run; with Autoreplay on, Zapier
//          runs the step again later with the same key, and the key store makes that safe.
// Guide: docs/platforms/zapier-code.md

const CONFIG_FIELDS = ['keystore_url', 'keystore_token', 'scope', 'key', 'target_url'];
const LEASE_SECONDS = 60; // longer than the action ever takes
const WAIT_SECONDS = 5; // the key store holds a duplicate this long for a first run still working

class TransientError extends Error {}

// ---- THE ACTION: your side effect, done once per key -----------------------------------
// Return {state: 'succeeded' | 'failed', result: {resource_id, status_code, body}}. Throw
// TransientError when it certainly did not happen (the key is released for the retry);
// any other error is an unknown outcome, left to the lease and a person.
async function action(payload, idempotencyKey) {
  let res;
  try {
    res = await fetch(inputData.target_url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': idempotencyKey },
      body: JSON.stringify(payload),
      signal: AbortSignal.timeout(20000),
    });
  } catch (error) {
    const code = error.cause && error.cause.code;
    if (code === 'ECONNREFUSED') throw new TransientError('the target refused the connection');
    throw error; // a timeout: did the target act or not? Unknown.
  }
  const text = await res.text();
  let body = text;
  try { body = JSON.parse(text); } catch (e) { /* not JSON: keep the text */ }
  if (res.status === 408 || res.status === 429 || res.status >= 500) {
    throw new TransientError(`the target answered ${res.status}`);
  }
  const result = { status_code: res.status, body };
  if (body && body.id !== undefined) result.resource_id = String(body.id);
  return { state: res.status < 400 ? 'succeeded' : 'failed', result };
}

// ---- the protocol: nothing to edit below -----------------------------------------------
const base = inputData.keystore_url.replace(/\/$/, '');
const headers = {
  Authorization: `Bearer ${inputData.keystore_token}`, 'Content-Type': 'application/json',
};
const scope = inputData.scope;
const key = inputData.key;
if (!key) throw new Error('the input field "key" is empty: map the trigger\'s event id');
const payload = {};
for (const [name, value] of Object.entries(inputData)) {
  if (!CONFIG_FIELDS.includes(name)) payload[name] = value;
}

async function call(method, path, body, retries = 0) {
  const waited = (body && body.wait_seconds) || 0; // the key store may hold a claim that long
  for (let attempt = 0; ; attempt++) {
    try {
      const res = await fetch(base + path, {
        method, headers, body: body && JSON.stringify(body),
        signal: AbortSignal.timeout(15000 + waited * 1000),
      });
      return { status: res.status, headers: res.headers, data: await res.json() };
    } catch (error) {
      if (attempt >= retries) throw error; // only calls safe to repeat pass retries > 0
      await new Promise((resolve) => setTimeout(resolve, 500 * 2 ** attempt));
    }
  }
}

function refused(res) {
  const error = res.data.error || {};
  return new Error(`key store: ${res.status} ${error.code} ${error.message}`);
}

// The lease token this claim proposes: lt_ + 32 base64url characters of 24 random bytes.
function newLeaseToken() {
  const bytes = new Uint8Array(24);
  (globalThis.crypto || require('crypto').webcrypto).getRandomValues(bytes);
  return 'lt_' + Buffer.from(bytes).toString('base64url');
}

// One request: while another run holds the key, the key store waits for it (WAIT_SECONDS)
// and answers with its result. A claim that got no answer is sent once more with the same
// lease token: if the lost one had acquired the key, the repeat resumes that attempt.
const claimBody = { scope, key, payload, lease_seconds: LEASE_SECONDS, lease_token: newLeaseToken() };
if (WAIT_SECONDS > 0) claimBody.wait_seconds = WAIT_SECONDS;
const claim = await call('POST', '/v1/claim', claimBody, 1);

const record = claim.data.record;
if (claim.status === 200) {
  const stored = record.result || {};
  output = { outcome: 'replay', replayed: true, state: record.state, attempt: record.attempt,
    resource_id: stored.resource_id, status_code: stored.status_code, body: stored.body };
} else if (claim.status === 201) {
  const lease = { scope, key, lease_token: claim.data.lease_token };
  let done;
  try {
    done = await action(payload, `${scope}:${key}`);
  } catch (error) {
    if (error instanceof TransientError) {
      await call('POST', '/v1/release', { ...lease, reason: error.message }, 3);
      throw new Error(`${error.message}; ${scope}/${key} was released, a replay will run it again`);
    }
    throw error; // unknown outcome: left to the lease, then to reconciliation
  }
  const completed = await call('POST', '/v1/complete',
    { ...lease, state: done.state, result: done.result }, 3); // same token: safe to repeat
  if (completed.status !== 200) throw refused(completed);
  output = { outcome: 'acquired', replayed: false, state: done.state,
    attempt: claim.data.attempt, ...done.result };
} else if (claim.status === 409 && claim.data.outcome === 'in_progress') { // try later
  throw new Error(`${scope}/${key} is still in progress in another run; try again later`);
} else if (claim.status === 409 && claim.data.outcome === 'needs_reconciliation') {
  throw new Error(`${scope}/${key}: an earlier run ended with an unknown outcome; a person must resolve it`);
} else if (claim.status === 422) {
  throw new Error(`${scope}/${key} was used before with different data; refused (not run)`);
} else {
  throw refused(claim);
}
