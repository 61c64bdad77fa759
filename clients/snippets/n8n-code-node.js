// Idempotency Key Store: an exactly-once step for the n8n Code node.
// Language: JavaScript. Mode: "Run Once for All Items". Paste the whole file, then edit
// SETTINGS and action() below. For every input item: claim the item's key -> run the
// action -> complete with its result. A repeat of the same key (a webhook resent, a
// "Retry On Fail", a re-run execution) gets the stored result and does not act again.
// Guide: docs/platforms/n8n-code.md

// ---- SETTINGS -------------------------------------------------------------------------
const SETTINGS = {
  // The key store and a client token. Read from the n8n server's environment when the
  // Code node may read it (N8N_BLOCK_ENV_ACCESS_IN_NODE=false); otherwise fill them in.
  keystoreUrl: env('KEYSTORE_URL', 'http://127.0.0.1:8080'),
  keystoreToken: env('KEYSTORE_TOKEN', ''),
  scope: 'create_invoice', // the kind of operation: letters, digits, _ . : -
  // The stable id of the business event: the trigger's event id, never $execution.id or a
  // fresh UUID (those change on every retry, and then every retry acts again).
  keyOf: (item) => item.json.event_id,
  payloadOf: (item) => item.json, // what the event says; the same key with other data is refused
  targetUrl: env('TARGET_URL', 'https://billing.example.com/invoices'), // used by action()
  leaseSeconds: 120, // longer than the action ever takes
  waitSeconds: 20, // how long the key store holds a duplicate for a first run still working (max 30)
};

// ---- THE ACTION: your side effect, done once per key -----------------------------------
// Return {state: 'succeeded' | 'failed', result: {resource_id, status_code, body}}.
// Throw new TransientError(...) when the action certainly did not happen and may be tried
// again (the key is released); any other error is an unknown outcome: the key is left to
// its lease and then to a person, rather than risk doing it twice.
async function action(item, idempotencyKey) {
  let res;
  try {
    res = await helpers.httpRequest({
      method: 'POST', url: SETTINGS.targetUrl, body: SETTINGS.payloadOf(item), json: true,
      headers: { 'Idempotency-Key': idempotencyKey }, // the target's own dedupe, if it has one
      returnFullResponse: true, ignoreHttpStatusErrors: true, timeout: 30000,
    });
  } catch (error) {
    if (error.code === 'ECONNREFUSED') throw new TransientError('the target refused the connection');
    throw error; // a timeout: did the target act or not? Unknown.
  }
  const status = res.statusCode;
  if (status === 408 || status === 429 || status >= 500) {
    throw new TransientError(`the target answered ${status}`); // it sent back no result
  }
  const result = { status_code: status, body: res.body };
  if (res.body && res.body.id !== undefined) result.resource_id = String(res.body.id);
  return { state: status < 400 ? 'succeeded' : 'failed', result }; // 4xx: a final refusal
}

// ---- the protocol: nothing to edit below -----------------------------------------------
const helpers = this.helpers;
class TransientError extends Error {}

function env(name, fallback) {
  try {
    return $env[name] || fallback;
  } catch (error) {
    return fallback; // env access is blocked on this n8n: use the fallback
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function keystore(method, path, { body, qs, retries = 0, waitSeconds = 0 } = {}) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await helpers.httpRequest({
        method, url: SETTINGS.keystoreUrl.replace(/\/$/, '') + path, body, qs, json: true,
        headers: { Authorization: `Bearer ${SETTINGS.keystoreToken}` },
        returnFullResponse: true, ignoreHttpStatusErrors: true, timeout: 35000 + waitSeconds * 1000,
      });
    } catch (error) {
      // No answer. Only calls that are safe to repeat pass retries > 0.
      if (attempt >= retries) throw error;
      await sleep(500 * 2 ** attempt);
    }
  }
}

function refusal(res) {
  const error = (res.body && res.body.error) || {};
  return new Error(`key store: ${res.statusCode} ${error.code || ''} ${error.message || ''}`.trim());
}

// The lease token this claim proposes (lt_ + 32 base64url characters). A claim that got no
// answer is sent again with it: if the lost one had acquired the key, the repeat resumes that
// attempt instead of finding it "in progress". From Node's crypto when the n8n instance lets
// the Code node load it (NODE_FUNCTION_ALLOW_BUILTIN=crypto); n8n blocks it by default, and
// then from Math.random, which is not a cryptographic source (see docs/platforms/n8n-code.md).
function newLeaseToken() {
  let bytes;
  try {
    bytes = require('crypto').randomBytes(24);
  } catch (error) {
    bytes = Buffer.from(Array.from({ length: 24 }, () => Math.floor(Math.random() * 256)));
  }
  return 'lt_' + bytes.toString('base64url');
}

async function claim(scope, key, payload) {
  const body = { scope, key, payload, lease_seconds: SETTINGS.leaseSeconds, lease_token: newLeaseToken() };
  // One request: while another run holds the key, the key store waits for it (up to 30 s)
  // and answers with its result. No answer at all: sent once more, with the same token.
  const waitSeconds = Math.min(Math.max(Math.floor(SETTINGS.waitSeconds), 0), 30);
  if (waitSeconds > 0) body.wait_seconds = waitSeconds;
  return keystore('POST', '/v1/claim', { body, retries: 1, waitSeconds });
}

async function exactlyOnce(item) {
  const scope = SETTINGS.scope;
  const key = String(SETTINGS.keyOf(item) ?? '');
  if (!key) throw new Error('no key for this item: check SETTINGS.keyOf');
  const res = await claim(scope, key, SETTINGS.payloadOf(item));
  const record = res.body && res.body.record;
  if (res.statusCode === 200) {
    return { outcome: 'replay', replayed: true, state: record.state, attempt: record.attempt,
      result: record.result };
  }
  if (res.statusCode === 409 && res.body.outcome === 'in_progress') { // try later
    throw new Error(`${scope}/${key} is still in progress in another run; try again later`);
  }
  if (res.statusCode === 409 && res.body.outcome === 'needs_reconciliation') {
    throw new Error(`${scope}/${key}: an earlier run ended with an unknown outcome; a person must resolve it`);
  }
  if (res.statusCode === 422) {
    throw new Error(`${scope}/${key} was used before with different data; refused (not run)`);
  }
  if (res.statusCode !== 201) throw refusal(res);

  const lease = { scope, key, lease_token: res.body.lease_token };
  let done;
  try {
    done = await action(item, `${scope}:${key}`);
  } catch (error) {
    if (error instanceof TransientError) {
      await keystore('POST', '/v1/release', { body: { ...lease, reason: error.message }, retries: 3 });
      throw new Error(`${error.message}; ${scope}/${key} was released, a retry will run it again`);
    }
    throw error; // unknown outcome: left to the lease, then to reconciliation
  }
  const completed = await keystore('POST', '/v1/complete', {
    body: { ...lease, state: done.state, result: done.result }, retries: 3, // same token: safe
  });
  if (completed.statusCode !== 200) throw refusal(completed);
  return { outcome: 'acquired', replayed: false, state: done.state,
    attempt: res.body.attempt, result: done.result };
}

const output = [];
for (const [index, item] of $input.all().entries()) {
  output.push({ json: { ...item.json, keystore: await exactlyOnce(item) }, pairedItem: index });
}
return output;
