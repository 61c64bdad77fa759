'use strict';
/**
 * The guard's decision: claim the key, and say which output the message takes
 * (docs/outcomes.md, which test/outcomes.test.js checks this against).
 *
 *   output 0 "new"              201 acquired: do the side effect, then Complete (or Release)
 *   output 1 "already done"     200 replay: the stored result of the first run
 *   output 2 "needs attention"  422 fingerprint_mismatch or 409 needs_reconciliation: a
 *                               person must decide; nothing was done
 *   error (to Catch nodes)      try later: 409 in_progress (another message still holds the
 *                               lease after the wait), the key store unreachable or failing;
 *                               nothing was claimed. Any other answer is an error as well.
 *
 * One request: while another message holds the lease, the key store itself waits for it
 * (`wait_seconds`, at most 30 s) and answers with what it did, so the duplicates of a message
 * that is being handled come out "already done" with its result. The claim proposes a lease
 * token made for this message's pass through the guard; a claim that got no answer is sent
 * once more with it, and resumes what the lost one acquired (contract v1.1).
 */
const crypto = require('node:crypto');
const { call, raise } = require('./client');

const NEW = 0;
const ALREADY_DONE = 1;
const NEEDS_ATTENTION = 2;
const MAX_WAIT_SECONDS = 30; // docs/api.md's limit on a claim's wait_seconds
// 24 random bytes: 32 base64url characters, 192 bits (docs/api.md asks for 128 at least)
const LEASE_TOKEN_BYTES = 24;

/** A lease token to propose: lt_ and 32 characters from Node's cryptographic source. */
function newLeaseToken() {
  return `lt_${crypto.randomBytes(LEASE_TOKEN_BYTES).toString('base64url')}`;
}

/**
 * Where a claim's answer goes.
 * @param {{status: number, body: object}} answer  what call() resolved with
 * @param {{scope: string, key: string}} claim
 * @returns {{output: number, keystore: object}}  keystore goes on msg.keystore
 * @throws {KeystoreError} for every answer that is not one of the three outputs
 */
function route(answer, claim) {
  const { status, body } = answer;
  const about = { scope: claim.scope, key: claim.key, record: body.record || null };
  if (status === 201 && body.outcome === 'acquired') {
    const keystore = { ...about, outcome: 'acquired', lease_token: body.lease_token, attempt: body.attempt };
    if (body.resumed === true) keystore.resumed = true;
    return { output: NEW, keystore };
  }
  if (status === 200 && body.outcome === 'replay') {
    return { output: ALREADY_DONE,
      keystore: { ...about, outcome: 'replay', state: body.record.state, result: body.record.result } };
  }
  const code = body.error && body.error.code;
  if (code === 'fingerprint_mismatch' || code === 'needs_reconciliation') {
    return { output: NEEDS_ATTENTION,
      keystore: { ...about, outcome: code, message: body.error.message } };
  }
  throw raise(answer);
}

/**
 * @param {{url: string, token: string, timeoutMs: number}} server
 * @param {object} claim  the body of POST /v1/claim (scope, key, payload, ...)
 * @param {number} waitSeconds  how long the key store may hold a duplicate (0-30)
 * @returns {Promise<{output: number, keystore: object}>}
 * @throws {KeystoreError}
 */
async function guard(server, claim, waitSeconds) {
  const wait = Math.min(Math.max(Math.floor(Number(waitSeconds) || 0), 0), MAX_WAIT_SECONDS);
  const body = { ...claim, lease_token: newLeaseToken() };
  if (wait > 0) body.wait_seconds = wait;
  const send = () => call(server, 'POST', '/v1/claim', { body, extraMs: wait * 1000 });
  let answer;
  try {
    answer = await send();
  } catch (error) {
    if (error.code !== 'unreachable') throw error;
    answer = await send(); // no answer: the same claim again, with the same token
  }
  return route(answer, claim);
}

module.exports = { guard, route, newLeaseToken, NEW, ALREADY_DONE, NEEDS_ATTENTION, MAX_WAIT_SECONDS };
