'use strict';
/**
 * The key store is down: the shipped webhook example must answer the sender 503 (so it
 * resends), never 2xx and never nothing, and a resend after the restart must create the
 * invoice once. A key store of the test's own (nodes/test-support/keystore-server.js),
 * really stopped and started again on the same port with the same database.
 */
const { it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const { KeyStore } = require('../../test-support/keystore-server');
const { startSink } = require('../../test-support/sink');
const { helper, loadExample, serveHttpNodes, eventId } = require('./support');

let ks;
let sink;
let nodeRed;
before(async () => {
  [ks, sink, nodeRed] = await Promise.all([KeyStore.start(), startSink(), serveHttpNodes()]);
});
after(async () => {
  await nodeRed.close();
  await sink.close();
  await ks.stop();
});
afterEach(async () => {
  await ks.resume(); // whatever a failed test left behind
  await helper.unload();
});

// Node-RED's own http server waits for a response forever: a flow that never answers would
// hang here, so a sender-like timeout turns "no answer" into a failure that says so.
const SENDER_TIMEOUT_MS = 30_000;

async function deliver(event) {
  const response = await fetch(`${nodeRed.url}/orders`, {
    method: 'POST', body: JSON.stringify(event), headers: { 'Content-Type': 'application/json' },
    signal: AbortSignal.timeout(SENDER_TIMEOUT_MS),
  });
  return { status: response.status, retryAfter: response.headers.get('retry-after'),
    body: await response.json() };
}

const loadWebhook = () => loadExample('webhook-exactly-once.json', { 'wh-create': { url: sink.url } },
  { url: ks.url, token: ks.clientToken });

it('answers 503 while the key store is down, and the resend after its restart creates the invoice once', { timeout: 120_000 }, async () => {
  await loadWebhook();
  const event = { id: eventId('ord'), amount: 700 };
  const before = sink.effects.length;
  await ks.halt();
  let down;
  try {
    down = await deliver(event);
  } finally {
    await ks.resume();
  }
  assert.deepEqual([down.status, down.retryAfter], [503, '30'], JSON.stringify(down.body));
  assert.equal(sink.effects.length, before, 'nothing was done without a claim');

  const resent = await deliver(event);
  const again = await deliver(event);
  assert.equal(resent.status, 201);
  assert.deepEqual([again.status, again.body], [200, resent.body]);
  assert.equal(sink.effects.length - before, 1, 'exactly one invoice');
});

it('answers 503 when the key store goes down after the claim and the release cannot reach it', { timeout: 120_000 }, async () => {
  await loadWebhook();
  const event = { id: eventId('ord'), amount: 800 };
  const before = sink.effects.length;
  sink.failNext(1, () => ks.halt()); // the invoice API fails, and meanwhile the key store stops
  let down;
  try {
    down = await deliver(event);
  } finally {
    await ks.resume();
  }
  assert.deepEqual([down.status, down.retryAfter], [503, '30'], JSON.stringify(down.body));
  assert.equal(sink.effects.length, before);
  // The claim could not be given back, so the record is still the first attempt's: a resend
  // waits for its lease (60 s in the example) and then goes to a person, never to a 2xx.
  const [, record] = await ks.api('GET', `/v1/keys?scope=create_invoice&key=${event.id}`);
  assert.equal(record.record.state, 'in_progress');
});
