'use strict';
/**
 * The same message delivered 5 times at once (an MQTT or webhook redelivery storm) through
 * guard -> http request (the effect, to a local sink) -> complete: one effect; the other four
 * wait for the first (the key store's wait_seconds, one request each) and come out "Already
 * done" with its result, or, when the key store has no waiting seat left for the token (or
 * the copy's claim raced the first one's insert, which the key store answers at once), go to
 * Catch as `in_progress` (try later), and come out "Already done" when sent again.
 */
const { it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const { startSink } = require('../../test-support/sink');
const { helper, loadFlow, waitUntil, eventId, keystore } = require('./support');

let sink;
before(async () => { sink = await startSink(); });
after(() => sink.close());
afterEach(() => helper.unload());

it('produces one effect for the same message 5 times at once', { timeout: 120_000 }, async () => {
  const flow = await loadFlow([
    { id: 'guard', type: 'keystore-guard', server: 'ks', scope: 'create_invoice',
      key: 'payload.id', keyType: 'msg', payload: 'payload', payloadType: 'msg',
      leaseSeconds: '60', onStale: 'reconcile', waitSeconds: '30',
      wires: [['effect'], ['replayed'], ['attention']] },
    { id: 'effect', type: 'http request', method: 'POST', ret: 'obj', paytoqs: 'ignore',
      url: sink.url, wires: [['complete']] },
    { id: 'complete', type: 'keystore-complete', server: 'ks', state: 'succeeded',
      resourceId: 'payload.id', resourceIdType: 'msg', statusCode: 'statusCode',
      statusCodeType: 'msg', body: 'payload', bodyType: 'msg', wires: [['done']] },
    { id: 'catcher', type: 'catch', scope: null, wires: [['errors']] },
    { id: 'done', type: 'helper' },
    { id: 'replayed', type: 'helper' },
    { id: 'attention', type: 'helper' },
    { id: 'errors', type: 'helper' },
  ]);
  const done = flow.collect('done');
  const replayed = flow.collect('replayed');
  const attention = flow.collect('attention');
  const errors = flow.collect('errors');
  const id = eventId('order');

  for (let i = 0; i < 5; i += 1) flow.get('guard').receive({ payload: { id, amount: 1250 } });
  await waitUntil(() => done.length + replayed.length + attention.length + errors.length >= 5,
    'all 5 messages to come out');

  assert.equal(sink.effects.length, 1, 'exactly one effect');
  assert.equal(done.length, 1);
  assert.equal(attention.length, 0, 'a running first copy is never a person\'s matter');
  assert.equal(replayed.length + errors.length, 4);
  assert.deepEqual(errors.map((m) => m.keystore.outcome), errors.map(() => 'in_progress'));
  const first = done[0].keystore;
  assert.equal(first.outcome, 'completed');
  assert.equal(first.lease_token, undefined, 'the lease token is used up');
  const tried = errors.length;
  for (let i = 0; i < tried; i += 1) flow.get('guard').receive({ payload: { id, amount: 1250 } });
  await waitUntil(() => replayed.length === 4, 'the copies that tried later');
  for (const msg of replayed) {
    assert.equal(msg.keystore.outcome, 'replay');
    assert.equal(msg.keystore.state, 'succeeded');
    assert.deepEqual(msg.keystore.result, first.result);
    assert.equal(msg.keystore.result.status_code, 201);
    assert.match(msg.keystore.result.resource_id, /^eff-\d+$/);
  }
  assert.equal(sink.effects.length, 1, 'still exactly one effect');
  const lookup = await fetch(`${keystore.url}/v1/keys?scope=create_invoice&key=${encodeURIComponent(id)}`,
    { headers: { Authorization: `Bearer ${keystore.token}` } }).then((r) => r.json());
  assert.equal(lookup.record.duplicate_count, 4 + tried, 'each claim counted once, a waiting one too');
});
