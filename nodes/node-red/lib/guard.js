'use strict';
/**
 * The guard's decision: claim the key, and say which output the message takes.
 *
 *   output 0 "New"              201 acquired: do the side effect, then Complete (or Release)
 *   output 1 "Already done"     200 replay: the stored result of the first run
 *   output 2 "Needs attention"  422 fingerprint_mismatch or 409 needs_reconciliation: a
 *                               person must decide; nothing was done
 *
 * A 409 in_progress (another message holds the lease) is waited out: the guard watches the
 * record (GET /v1/keys?wait=) and claims again, for at most `waitSeconds` in all, so the
 * duplicates of a message that is being handled come out "Already done" with its result.
 * Still in progress after that, or any other answer: a KeystoreError (for a Catch node).
 */
const { call, raise } = require('./client');

const NEW = 0;
const ALREADY_DONE = 1;
const NEEDS_ATTENTION = 2;
const MAX_SERVER_WAIT_SECONDS = 30; // the contract's limit for one lookup with `wait`
const MAX_ROUNDS = 100; // a bound on claim/wait rounds, whatever the clock does

/**
 * @param {{url: string, token: string, timeoutMs: number}} server
 * @param {object} claim  the body of POST /v1/claim (scope, key, payload, ...)
 * @param {number} waitSeconds  how long duplicates may wait for a running attempt
 * @returns {Promise<{output: number, keystore: object}>}  keystore goes on msg.keystore
 * @throws {KeystoreError}
 */
async function guard(server, claim, waitSeconds) {
  const deadline = Date.now() + waitSeconds * 1000;
  for (let round = 0; round < MAX_ROUNDS; round += 1) {
    const answer = await call(server, 'POST', '/v1/claim', { body: claim });
    const { status, body } = answer;
    const about = { scope: claim.scope, key: claim.key, record: body.record || null };
    if (status === 201) {
      return { output: NEW,
        keystore: { ...about, outcome: 'acquired', lease_token: body.lease_token, attempt: body.attempt } };
    }
    if (status === 200) {
      return { output: ALREADY_DONE,
        keystore: { ...about, outcome: 'replay', state: body.record.state, result: body.record.result } };
    }
    const code = body.error && body.error.code;
    if (code === 'fingerprint_mismatch' || code === 'needs_reconciliation') {
      return { output: NEEDS_ATTENTION,
        keystore: { ...about, outcome: code, message: body.error.message } };
    }
    const left = Math.floor((deadline - Date.now()) / 1000);
    if (code !== 'in_progress' || left < 1) throw raise(answer);
    const wait = Math.min(left, MAX_SERVER_WAIT_SECONDS);
    // The answer does not matter: the next claim says what happened (and reports errors).
    await call(server, 'GET', '/v1/keys', { params: { scope: claim.scope, key: claim.key, wait },
      extraMs: wait * 1000 });
  }
  throw new Error(`the key store kept answering in_progress for ${claim.scope} / ${claim.key}`);
}

module.exports = { guard, NEW, ALREADY_DONE, NEEDS_ATTENTION };
