'use strict';
/**
 * The shipped example flow examples/webhook-exactly-once.json, imported as a user would and
 * driven over real HTTP: a sender's redeliveries create one invoice, and a delivery that
 * failed before the effect is answered 503 so the sender's next try does it.
 */
const { it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const { startSink } = require('../../test-support/sink');
const { helper, loadExample, serveHttpNodes, waitUntil, eventId } = require('./support');

let sink;
let nodeRed;
before(async () => {
  sink = await startSink();
  nodeRed = await serveHttpNodes();
});
after(async () => {
  await nodeRed.close();
  await sink.close();
});
afterEach(() => helper.unload());

async function deliver(event) {
  const response = await fetch(`${nodeRed.url}/orders`, {
    method: 'POST', body: JSON.stringify(event), headers: { 'Content-Type': 'application/json' },
    signal: AbortSignal.timeout(60_000),
  });
  return { status: response.status, retryAfter: response.headers.get('retry-after'),
    body: await response.json() };
}

it('answers 5 simultaneous deliveries with one invoice: 201 once, 200 with it or 503 (try later)', { timeout: 120_000 }, async () => {
  // The example's 10 s wait is ample for a real API; 30 keeps a loaded CI machine from
  // turning a slow first copy into 503s for the other four.
  await loadExample('webhook-exactly-once.json',
    { 'wh-create': { url: sink.url }, 'wh-guard': { waitSeconds: '30' } });
  const event = { id: eventId('ord'), amount: 1250 };
  const before = sink.effects.length;

  const answers = await Promise.all([1, 2, 3, 4, 5].map(() => deliver(event)));

  assert.equal(sink.effects.length - before, 1, 'exactly one invoice');
  const created = answers.filter((a) => a.status === 201);
  assert.equal(created.length, 1, JSON.stringify(answers));
  const invoice = created[0].body;
  assert.match(invoice.id, /^eff-\d+$/);
  // A copy waits for the first (the key store's wait_seconds) while the key store has a
  // waiting seat for the token (one per worker here); without one, or when its claim races
  // the first one's insert (the key store then answers in_progress at once), it is told to
  // try later (503, Retry-After), and its resend gets the invoice. Never a person's matter.
  const waited = answers.filter((a) => a.status === 200);
  const later = answers.filter((a) => a.status === 503);
  assert.equal(waited.length + later.length, 4, JSON.stringify(answers));
  for (const answer of waited) assert.deepEqual(answer.body, invoice);
  for (const answer of later) assert.equal(answer.retryAfter, '30');
  for (const answer of await Promise.all(later.map(() => deliver(event)))) {
    assert.deepEqual([answer.status, answer.body], [200, invoice]);
  }
  assert.equal(sink.effects.length - before, 1, 'still exactly one invoice');
});

it('answers 503 when the effect failed, and the redelivery creates the invoice once', { timeout: 120_000 }, async () => {
  await loadExample('webhook-exactly-once.json', { 'wh-create': { url: sink.url } });
  const event = { id: eventId('ord'), amount: 99 };
  const before = sink.effects.length;
  sink.failNext(1);

  const failed = await deliver(event);
  const redelivered = await deliver(event);
  const again = await deliver(event);

  assert.equal(failed.status, 503);
  assert.equal(failed.retryAfter, '30');
  assert.equal(redelivered.status, 201);
  assert.equal(again.status, 200);
  assert.deepEqual(again.body, redelivered.body);
  assert.equal(sink.effects.length - before, 1, 'exactly one invoice');
});

it('answers 409 to the same order id with another amount', { timeout: 120_000 }, async () => {
  await loadExample('webhook-exactly-once.json', { 'wh-create': { url: sink.url } });
  const id = eventId('ord');
  assert.equal((await deliver({ id, amount: 5 })).status, 201);
  const conflict = await deliver({ id, amount: 500 });
  assert.equal(conflict.status, 409);
  assert.deepEqual(conflict.body, { error: 'fingerprint_mismatch' });
});

it('examples/catch-and-retry.json: one invoice through a failure and a redelivery', { timeout: 120_000 }, async () => {
  await loadExample('catch-and-retry.json', {
    'cr-create': { url: sink.url },
    'cr-pause': { timeout: '50', timeoutUnits: 'milliseconds' },
    'cr-done': { type: 'helper' },
    'cr-already': { type: 'helper' },
    'cr-attention': { type: 'helper' },
    'cr-gaveup': { type: 'helper' },
  });
  const seen = Object.fromEntries(['cr-done', 'cr-already', 'cr-attention', 'cr-gaveup']
    .map((id) => { const list = []; helper.getNode(id).on('input', (m) => list.push(m)); return [id, list]; }));
  const before = sink.effects.length;
  sink.failNext(1);

  helper.getNode('cr-inject').receive({});
  await waitUntil(() => seen['cr-done'].length === 1, 'the invoice');
  helper.getNode('cr-inject').receive({}); // the queue delivers the same event again
  await waitUntil(() => seen['cr-already'].length === 1, 'the redelivery');

  assert.equal(sink.effects.length - before, 1, 'exactly one invoice');
  assert.equal(seen['cr-done'][0].retries, 1, 'one retry, after the API failed');
  assert.equal(seen['cr-done'][0].keystore.attempt, 2);
  assert.deepEqual(seen['cr-already'][0].keystore.result, seen['cr-done'][0].keystore.result);
  assert.equal(seen['cr-attention'].length + seen['cr-gaveup'].length, 0);
});
