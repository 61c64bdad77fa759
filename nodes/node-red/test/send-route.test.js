'use strict';
/** lib/send.js route(): each answer of POST /v1/send takes the output its header says. */
const { it } = require('node:test');
const assert = require('node:assert/strict');
const { route, SENT, FAILED, ACCEPTED, NEEDS_ATTENTION } = require('../lib/send');

const about = { scope: 's', key: 'k', connection: 'billing' };
const record = (state, result = null) => ({ scope: 's', key: 'k', state, result });
const result = { status_code: 201, resource_id: 'in_1', body: { id: 'in_1' } };

it('routes sent, replays, failed and accepted by outcome and the record\'s state', () => {
  const cases = [
    [201, { outcome: 'sent', result, record: record('succeeded', result) }, SENT],
    [200, { outcome: 'replay', result, record: record('succeeded', result) }, SENT],
    [200, { outcome: 'failed', result: { ...result, status_code: 422 }, record: record('failed') }, FAILED],
    [200, { outcome: 'replay', record: record('failed', { status_code: 422 }) }, FAILED],
    [202, { outcome: 'accepted', record: record('in_progress') }, ACCEPTED],
  ];
  for (const [status, body, output] of cases) {
    assert.equal(route({ status, body }, about).output, output, `${status} ${body.outcome} ${body.record.state}`);
  }
  const replay = route({ status: 200, body: { outcome: 'replay', record: record('failed', { status_code: 422 }) } }, about);
  assert.equal(replay.keystore.status_code, 422, 'a replay without `result` takes the record\'s');
  assert.equal(route({ status: 202, body: { outcome: 'accepted', result, record: record('in_progress') } }, about).keystore.result, null);
});

it('sends mismatches and unknown outcomes to needs attention, everything else to Catch with its code', () => {
  for (const [status, code] of [[422, 'fingerprint_mismatch'], [409, 'needs_reconciliation']]) {
    const routed = route({ status, body: { error: { code, message: code } } }, about);
    assert.deepEqual([routed.output, routed.keystore.outcome], [NEEDS_ATTENTION, code]);
  }
  for (const [status, code] of [[409, 'in_progress'], [404, 'not_found'], [400, 'invalid_request'], [503, 'unavailable']]) {
    assert.throws(() => route({ status, retryAfter: 2, body: { error: { code, message: code } } }, about),
      (error) => error.code === code && error.status === status);
  }
  // an outcome under the wrong status is not taken at its word
  assert.throws(() => route({ status: 200, body: { outcome: 'sent', record: record('succeeded') } }, about));
});
