'use strict';
/**
 * A catch-and-retry loop: Catch -> release -> delay -> back into the guard. The effect fails
 * once before it happens (the sink answers 503), and a step after Complete fails once after
 * it happened. The loop retries both; the effect still happens exactly once.
 */
const { it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const { startSink } = require('../../test-support/sink');
const { helper, loadFlow, waitUntil, eventId, keystore } = require('./support');

let sink;
before(async () => { sink = await startSink(); });
after(() => sink.close());
afterEach(() => helper.unload());

const THROW_ON_HTTP_ERROR = 'if (msg.statusCode >= 300) { throw new Error("effect failed: HTTP " + msg.statusCode); }\nreturn msg;';
const FAIL_FIRST_CALL = 'const calls = context.get("calls") || 0;\ncontext.set("calls", calls + 1);\n'
  + 'if (calls === 0) { throw new Error("notification service is down"); }\nreturn msg;';
const BOUNDED_RETRY = 'msg.retries = (msg.retries || 0) + 1;\nreturn msg.retries > 5 ? [null, msg] : [msg, null];';

it('retries through Catch and release, and the effect happens once', { timeout: 120_000 }, async () => {
  const flow = await loadFlow([
    { id: 'guard', type: 'keystore-guard', server: 'ks', scope: 'create_invoice',
      key: 'event.id', keyType: 'msg', payload: 'event', payloadType: 'msg',
      leaseSeconds: '60', onStale: 'reconcile', waitSeconds: '5',
      wires: [['prepare'], ['notify'], ['attention']] },
    { id: 'prepare', type: 'change', wires: [['effect']],
      rules: [{ t: 'set', p: 'payload', pt: 'msg', to: 'event', tot: 'msg' }] },
    { id: 'effect', type: 'http request', method: 'POST', ret: 'obj', paytoqs: 'ignore',
      url: sink.url, wires: [['check']] },
    { id: 'check', type: 'function', func: THROW_ON_HTTP_ERROR, outputs: 1, wires: [['complete']] },
    { id: 'complete', type: 'keystore-complete', server: 'ks', state: 'succeeded',
      resourceId: 'payload.id', resourceIdType: 'msg', statusCode: 'statusCode',
      statusCodeType: 'msg', body: 'payload', bodyType: 'msg', wires: [['notify']] },
    { id: 'notify', type: 'function', func: FAIL_FIRST_CALL, outputs: 1, wires: [['out']] },
    { id: 'catcher', type: 'catch', scope: null, wires: [['retry']] },
    { id: 'retry', type: 'function', func: BOUNDED_RETRY, outputs: 2, wires: [['release'], ['gaveup']] },
    { id: 'release', type: 'keystore-release', server: 'ks', reason: '', wires: [['pause']] },
    { id: 'pause', type: 'delay', pauseType: 'delay', timeout: '50', timeoutUnits: 'milliseconds',
      wires: [['guard']] },
    { id: 'out', type: 'helper' },
    { id: 'attention', type: 'helper' },
    { id: 'gaveup', type: 'helper' },
  ]);
  const out = flow.collect('out');
  const attention = flow.collect('attention');
  const gaveup = flow.collect('gaveup');
  const released = flow.collect('release');
  const id = eventId('order');
  sink.failNext(1);

  flow.get('guard').receive({ event: { id, amount: 10, currency: 'EUR' } });
  await waitUntil(() => out.length + attention.length + gaveup.length >= 1, 'the message to come out');

  assert.equal(sink.effects.length, 1, 'exactly one effect');
  assert.deepEqual(sink.effects[0], { id, amount: 10, currency: 'EUR' });
  assert.equal(attention.length + gaveup.length, 0);
  assert.equal(out.length, 1);
  const msg = out[0];
  assert.equal(msg.retries, 2, 'one retry before the effect, one after it');
  assert.equal(msg.keystore.outcome, 'replay');
  assert.equal(msg.keystore.result.resource_id, 'eff-1');
  // The first retry gave attempt 1 back (reason: the caught error); the second found nothing to release.
  assert.equal(released.length, 2);
  const lookup = await fetch(`${keystore.url}/v1/keys?scope=create_invoice&key=${encodeURIComponent(id)}`,
    { headers: { Authorization: `Bearer ${keystore.token}` } }).then((r) => r.json());
  assert.equal(lookup.record.state, 'succeeded');
  assert.equal(lookup.record.attempt, 2);
});
