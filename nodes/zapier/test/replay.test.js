'use strict';
/**
 * The Zap "trigger -> Claim -> Filter (Is New) -> effect -> Complete", run by Zapier's own
 * runner against the real key store and a local effect sink.
 */
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startSink, sendEffect } = require('../../test-support/sink');
const { App, run, itemId, rejection } = require('./support');

const SCOPE = 'create_invoice';
let sink;
before(async () => { sink = await startSink(); });
after(() => sink.close());

/** The Zap's steps for one trigger item; the Filter continues only when `is_new` is true. */
async function runZap(item, claimInput = {}) {
  const claim = await run(App.creates.claim, {
    scope: SCOPE, key: item.id, payload: { amount: item.amount, customer: item.customer },
    ...claimInput,
  });
  if (claim.is_new !== true) return { claim };
  const effect = await sendEffect(sink.url, item);
  if (effect.status !== 201) {
    const released = await run(App.creates.release, {
      scope: SCOPE, key: item.id, lease_token: claim.lease_token, reason: `sink ${effect.status}`,
    });
    return { claim, released };
  }
  const completed = await run(App.creates.complete, {
    scope: SCOPE, key: item.id, lease_token: claim.lease_token, state: 'succeeded',
    resource_id: effect.body.id, status_code: String(effect.status),
    result_body: { invoice: effect.body.id },
  });
  return { claim, completed };
}

describe('claim -> effect -> complete', () => {
  it('runs the effect once for the same trigger item twice, and replays the result', async () => {
    const item = { id: itemId('order'), amount: '1250', customer: 'cus_9' };
    const before = sink.effects.length;

    const first = await runZap(item);
    const second = await runZap(item);

    assert.equal(sink.effects.length - before, 1, 'exactly one effect');
    assert.equal(first.claim.outcome, 'acquired');
    assert.equal(first.claim.is_new, true);
    assert.match(first.claim.lease_token, /\S/);
    assert.equal(first.completed.state, 'succeeded');
    assert.equal(second.claim.outcome, 'replay');
    assert.equal(second.claim.is_new, false);
    assert.equal(second.claim.lease_token, null);
    assert.equal(second.claim.state, 'succeeded');
    assert.equal(second.claim.result_resource_id, first.completed.result_resource_id);
    assert.equal(second.claim.result_status_code, 201);
    assert.deepEqual(second.claim.result_body, { invoice: first.completed.result_resource_id });
    assert.equal(second.claim.duplicate_count, 1);
  });

  it('halts a repeat of the key with a different payload and keeps the first result', async () => {
    const item = { id: itemId('order'), amount: '1250', customer: 'cus_9' };
    const first = await runZap(item);
    const effects = sink.effects.length;

    const error = await rejection(runZap({ ...item, amount: '9999' }));

    assert.equal(error.name, 'HaltedError');
    assert.match(error.message, /already used with a different payload/);
    assert.match(error.message, new RegExp(item.id));
    assert.equal(sink.effects.length, effects, 'no second effect');
    const [found] = await run(App.searches.find_operation, { scope: SCOPE, key: item.id });
    assert.equal(found.result_resource_id, first.completed.result_resource_id);
  });

  it('gives the attempt back when the effect failed, and the next delivery does it once', async () => {
    const item = { id: itemId('order'), amount: '10', customer: 'cus_1' };
    const before = sink.effects.length;
    sink.failNext(1);

    const failed = await runZap(item);
    const retried = await runZap(item);
    const repeated = await runZap(item);

    assert.equal(failed.released.state, 'released');
    assert.equal(retried.claim.outcome, 'acquired');
    assert.equal(retried.claim.attempt, 2);
    assert.equal(repeated.claim.outcome, 'replay');
    assert.equal(sink.effects.length - before, 1, 'exactly one effect');
  });
});
