'use strict';
/**
 * "keystore send": the key store makes one request to a connection's API at most once per
 * (scope, key) (POST /v1/send, docs/api.md "Outbound"); this says which output its answer
 * takes. The key store decides (the claim, the retries, the settlement); the node maps:
 *
 *   output 0 "sent"             201 sent, or 200 replay of a send that succeeded: the API's
 *                               answer (status_code, resource_id, body) is the result
 *   output 1 "failed"           200 failed, or a replay of one: the API refused for good (a
 *                               4xx); every repeat of the key gets the same answer
 *   output 2 "accepted"         202: not settled within the wait; the key store goes on with
 *                               it. Send the same message again later for its answer.
 *   output 3 "needs attention"  422 fingerprint_mismatch or 409 needs_reconciliation: a
 *                               person decides in the review queue; nothing was sent
 *   error (to Catch nodes)      409 in_progress (the first send still runs: try later), the
 *                               key store unreachable or failing, and any other refusal
 *                               (404 for an unknown connection, 400 for a bad path...)
 *
 * A request that got no answer is not repeated here: the send may be queued, and the same
 * message sent again later gets what the first one did (the key store never sends twice).
 */
const { call, raise } = require('./client');

const SENT = 0;
const FAILED = 1;
const ACCEPTED = 2;
const NEEDS_ATTENTION = 3;
const MAX_WAIT_SECONDS = 30; // docs/api.md's limit on a send's wait_seconds
const METHODS = ['POST', 'PUT', 'PATCH', 'DELETE'];
const ANSWERS = { 201: ['sent'], 200: ['failed', 'replay'], 202: ['accepted'] };

/**
 * Where a send's answer goes.
 * @param {{status: number, body: object}} answer  what call() resolved with
 * @param {{scope: string, key: string, connection: string}} send
 * @returns {{output: number, keystore: object}}  keystore goes on msg.keystore
 * @throws {KeystoreError} for every answer that is not one of the four outputs
 */
function route(answer, send) {
  const { status, body } = answer;
  const about = { scope: send.scope, key: send.key, connection: send.connection };
  if ((ANSWERS[status] || []).includes(body.outcome) && body.record) {
    const { record } = body;
    const result = body.outcome === 'accepted' ? null : (body.result || record.result || null);
    const keystore = { ...about, outcome: body.outcome, state: record.state,
      status_code: result ? result.status_code ?? null : null,
      resource_id: result ? result.resource_id ?? null : null, result, record };
    if (body.outcome === 'accepted') return { output: ACCEPTED, keystore };
    const refused = body.outcome === 'failed' || record.state === 'failed';
    return { output: refused ? FAILED : SENT, keystore };
  }
  const code = body.error && body.error.code;
  if (code === 'fingerprint_mismatch' || code === 'needs_reconciliation') {
    return { output: NEEDS_ATTENTION,
      keystore: { ...about, outcome: code, message: body.error.message, record: body.record || null } };
  }
  throw raise(answer);
}

/**
 * @param {{url: string, token: string, timeoutMs: number}} server
 * @param {object} send  the body of POST /v1/send (scope, key, connection, request, ...)
 * @param {number} waitSeconds  how long the key store may wait for the send to settle (0-30)
 * @returns {Promise<{output: number, keystore: object}>}
 * @throws {KeystoreError}
 */
async function sendOnce(server, send, waitSeconds) {
  const wait = Math.min(Math.max(Math.ceil(Number(waitSeconds) || 0), 0), MAX_WAIT_SECONDS);
  const answer = await call(server, 'POST', '/v1/send',
    { body: { ...send, wait_seconds: wait }, extraMs: wait * 1000 });
  return route(answer, send);
}

module.exports = { sendOnce, route, SENT, FAILED, ACCEPTED, NEEDS_ATTENTION, MAX_WAIT_SECONDS, METHODS };
