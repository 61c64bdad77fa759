'use strict';
/**
 * "keystore send" in Node-RED against a real key store (its own, with an operator token to
 * make the connection and a sealing key for its headers) and a real invoices API on loopback
 * (test-support/downstream.js): each answer of POST /v1/send ends where lib/send.js says, and
 * the API gets each operation once, with the connection's credentials and idempotency header.
 */
const { it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const { helper, loadFlow, loadExample, serveHttpNodes, waitUntil, eventId } = require('./support');
const { KeyStore, KEYSTORE_BIN } = require('../../test-support/keystore-server');
const { startDownstream } = require('../../test-support/downstream');

const API_TOKEN = 'sk_test_only_in_the_key_store';
const OUTPUTS = ['sent', 'failed', 'accepted', 'attention'];
let ks;
let api;

before(async () => {
  process.env.KEYSTORE_SECRET_KEY = execFileSync(KEYSTORE_BIN, ['secret-key'], { encoding: 'utf8' }).trim();
  [ks, api] = await Promise.all([KeyStore.start(), startDownstream()]);
  const [status, body] = await ks.api('POST', '/v1/connections', {
    name: 'billing', base_url: `${api.url}/api`, headers: { Authorization: `Bearer ${API_TOKEN}` },
    idempotency_header: 'Idempotency-Key', timeout_seconds: 10, retry_window_seconds: 60,
  }, ks.operatorToken);
  assert.equal(status, 201, JSON.stringify(body));
  // an API without an idempotency header, and no check: an unknown outcome goes to a person
  const [plain, answer] = await ks.api('POST', '/v1/connections', {
    name: 'billing-plain', base_url: `${api.url}/api`, idempotency_header: null, retry_window_seconds: 60,
  }, ks.operatorToken);
  assert.equal(plain, 201, JSON.stringify(answer));
});
after(async () => {
  await ks?.stop();
  await api?.close();
});
afterEach(() => helper.unload());

function sendNode(id, waitSeconds, extra = {}) {
  return { id, type: 'keystore-send', server: 'ks', connection: 'billing', scope: 'create_invoice',
    key: 'payload.order', keyType: 'msg', method: 'POST', path: '/invoices', pathType: 'str',
    body: 'payload', bodyType: 'msg', headers: '', headersType: 'none', payload: 'payload',
    payloadType: 'msg', resourceIdPointer: '/id', waitSeconds, wires: OUTPUTS.map((o) => [o]), ...extra };
}

async function sendFlow(extra) {
  const flow = await loadFlow([
    sendNode('send', '10', extra), sendNode('quick', '0', extra),
    { id: 'catcher', type: 'catch', scope: null, wires: [['errors']] },
    ...[...OUTPUTS, 'errors'].map((id) => ({ id, type: 'helper' })),
  ], { url: ks.url, token: ks.clientToken });
  const out = Object.fromEntries([...OUTPUTS, 'errors'].map((id) => [id, flow.collect(id)]));
  const landed = (msg) => Object.entries(out).find(([, list]) => list.some((m) => m._msgid === msg._msgid));
  /** Sends msg into node `id`; resolves with [the output it took, the message there]. */
  const through = async (id, msg) => {
    flow.get(id).receive(msg);
    await waitUntil(() => landed(msg), `the answer of ${id}`, 45_000);
    const [name, list] = landed(msg);
    return [name, list.find((m) => m._msgid === msg._msgid)];
  };
  return { flow, out, through };
}

const order = (name, total = 1250) => ({ _msgid: eventId('m'), payload: { order: eventId(name), total } });
/** The same message again, as a redelivery brings it (the node replaced the first's payload). */
const redelivery = (msg, payload = {}) => ({ _msgid: eventId('m'), payload: { ...msg.sent, ...payload } });
/** A message to send; `sent` keeps what it carried, for redelivery(). */
const fresh = (name, total) => {
  const msg = order(name, total);
  msg.sent = { ...msg.payload };
  return msg;
};

it('sends once: "sent" with the API\'s answer, then "sent" again as a replay, one request to the API', async () => {
  const { through } = await sendFlow();
  const msg = fresh('o');
  const [first, sent] = await through('send', msg);
  assert.equal(first, 'sent', JSON.stringify(sent?.keystore));
  assert.deepEqual([sent.keystore.outcome, sent.statusCode, sent.keystore.state], ['sent', 201, 'succeeded']);
  assert.equal(sent.payload.total, 1250);
  assert.equal(sent.keystore.resource_id, sent.payload.id, 'the resource id by the pointer /id');
  const key = `create_invoice:${msg.sent.order}`;
  const [got] = api.requestsFor(key);
  assert.deepEqual([got.method, got.path, got.headers.authorization], ['POST', '/api/invoices', `Bearer ${API_TOKEN}`]);

  const [again, replay] = await through('send', redelivery(msg));
  assert.deepEqual([again, replay.keystore.outcome, replay.keystore.resource_id], ['sent', 'replay', sent.keystore.resource_id]);
  assert.equal(api.requestsFor(key).length, 1, 'the repeat sent nothing');
});

it('a permanent refusal goes to "failed" with the API\'s answer, and so does every repeat', async () => {
  const { through } = await sendFlow();
  const msg = fresh('refused');
  api.script(`create_invoice:${msg.sent.order}`, { status: 422, body: { error: 'total must be positive' } });
  const [first, failed] = await through('send', msg);
  assert.equal(first, 'failed', JSON.stringify(failed?.keystore));
  assert.deepEqual([failed.keystore.outcome, failed.statusCode, failed.payload], ['failed', 422, { error: 'total must be positive' }]);
  const [again, replay] = await through('send', redelivery(msg));
  assert.deepEqual([again, replay.keystore.outcome, replay.statusCode], ['failed', 'replay', 422]);
  assert.equal(api.requestsFor(`create_invoice:${msg.sent.order}`).length, 1);
});

it('a slow API: "accepted", a repeat while it runs is in_progress to Catch, and once settled a replay', async () => {
  const { through } = await sendFlow();
  const msg = fresh('slow');
  const key = `create_invoice:${msg.sent.order}`;
  api.script(key, { create: true, status: 201, delayMs: 3000 });
  const [first, accepted] = await through('quick', msg);
  assert.deepEqual([first, accepted.keystore.outcome, accepted.keystore.result], ['accepted', 'accepted', null]);
  const [running, caught] = await through('quick', redelivery(msg));
  assert.deepEqual([running, caught.keystore.outcome], ['errors', 'in_progress'], JSON.stringify(caught.keystore));
  assert.equal(caught.error.source.id, 'quick');

  const [status, looked] = await ks.api('GET', `/v1/keys?scope=create_invoice&key=${encodeURIComponent(msg.sent.order)}&wait=20`);
  assert.deepEqual([status, looked.record.state], [200, 'succeeded'], JSON.stringify(looked));
  const [later, replay] = await through('send', redelivery(msg));
  assert.deepEqual([later, replay.keystore.outcome, replay.statusCode], ['sent', 'replay', 201]);
  assert.equal(api.requestsFor(key).length, 1);
});

it('the same key with another body goes to "needs attention" and sends nothing', async () => {
  const { through } = await sendFlow();
  const msg = fresh('changed');
  assert.equal((await through('send', msg))[0], 'sent');
  const [output, attention] = await through('send', redelivery(msg, { total: 9999 }));
  assert.deepEqual([output, attention.keystore.outcome], ['attention', 'fingerprint_mismatch']);
  assert.equal(api.requestsFor(`create_invoice:${msg.sent.order}`).length, 1);
});

it('an unknown connection is an error to Catch nodes with the key store\'s code; nothing is sent', async () => {
  const { through } = await sendFlow({ connection: 'no-such-api' });
  const msg = fresh('nowhere');
  const [output, caught] = await through('send', msg);
  assert.deepEqual([output, caught.keystore.outcome], ['errors', 'not_found'], JSON.stringify(caught.keystore));
  assert.equal(api.requestsFor(`create_invoice:${msg.sent.order}`).length, 0);
});

it('examples/send-once-invoice.json over HTTP: 201 with the invoice once, 200 with the same one after, 422 for a refusal', async () => {
  await loadExample('send-once-invoice.json', {}, { url: ks.url, token: ks.clientToken });
  const web = await serveHttpNodes();
  try {
    const post = async (order) => {
      const response = await fetch(`${web.url}/orders`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(order), signal: AbortSignal.timeout(60_000) });
      return [response.status, await response.json()];
    };
    const order = { id: eventId('ord'), total: 1250 };
    const [created, invoice] = await post(order);
    assert.deepEqual([created, invoice.total], [201, 1250], JSON.stringify(invoice));
    const [repeat, same] = await post(order);
    assert.deepEqual([repeat, same.id], [200, invoice.id]);
    assert.equal(api.requestsFor(`create_invoice:${order.id}`).length, 1);

    const refused = { id: eventId('ord'), total: -5 };
    api.script(`create_invoice:${refused.id}`, { status: 422, body: { error: 'total must be positive' } });
    assert.deepEqual(await post(refused), [422, { error: 'total must be positive' }]);
    assert.deepEqual((await post({ ...refused, total: 5 }))[0], 409, 'the same order id with another total: for a person');
  } finally {
    await web.close();
  }
});

it('an API that answers 500 with no idempotency header and no check: "needs attention", and so does a repeat', async () => {
  const { through } = await sendFlow({ connection: 'billing-plain' });
  const reference = eventId('unknown');
  api.script(reference, { status: 500, body: { error: 'internal' } });
  const msg = { _msgid: eventId('m'), payload: { order: reference, reference, total: 10 } };
  const [output, attention] = await through('send', msg);
  assert.deepEqual([output, attention.keystore.outcome], ['attention', 'needs_reconciliation'], JSON.stringify(attention.keystore));
  assert.equal(attention.keystore.record.state, 'needs_reconciliation');
  const [again, still] = await through('send', { _msgid: eventId('m'), payload: { order: reference, reference, total: 10 } });
  assert.deepEqual([again, still.keystore.outcome], ['attention', 'needs_reconciliation']);
  assert.equal(api.requestsFor(reference).length, 1, 'never a blind retry');
});
