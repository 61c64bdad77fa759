'use strict';
/**
 * The shipped flow examples/gateway-exactly-once.json behind the key store's inbound gateway
 * (issue 14): "Stripe" posts signed events to a `stripe` source of a real `keystore serve`
 * (its own, with KEYSTORE_SECRET_KEY, so the test can create the source and stop it), which
 * forwards them to the flow's "http in" over real HTTP. Whatever the gateway does (one
 * forward, forwards again after Node-RED was down, after a timeout, or an operator's
 * redelivery), the invoice API is called once.
 */
const { it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const http = require('node:http');
const { KeyStore, KEYSTORE_BIN } = require('../../test-support/keystore-server');
const { Gateway, forwardSecret, forwardSignature, stripeEvent } = require('../../test-support/gateway');
const { helper, loadExample, serveHttpNodes } = require('./support');

const OUTAGE_MS = 5_000; // Node-RED down while the gateway retries (refused connections)
const SETTLE_MS = 120_000; // full-jitter backoff after a few refused attempts waits up to 16 s

/** The invoice API: counts calls per Idempotency-Key; each call takes `delayMs`. */
async function startInvoiceApi() {
  const api = { calls: new Map(), delayMs: 0 };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => setTimeout(() => {
      const key = req.headers['idempotency-key'];
      api.calls.set(key, (api.calls.get(key) ?? 0) + 1);
      res.writeHead(201, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ id: `INV-${api.calls.size}`, ...JSON.parse(body) }));
    }, api.delayMs));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  api.url = `http://127.0.0.1:${server.address().port}/invoices`;
  api.close = () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); });
  return api;
}

let ks;
let api;
let nodeRed;
let port;
let secret;
let gw;

before(async () => {
  process.env.KEYSTORE_SECRET_KEY = execFileSync(KEYSTORE_BIN, ['secret-key'], { encoding: 'utf8' }).trim();
  secret = forwardSecret();
  process.env.KEYSTORE_FORWARD_SECRET = secret.whsec; // what the flow's function node reads
  [ks, api] = await Promise.all([KeyStore.start(), startInvoiceApi()]);
  await loadExample('gateway-exactly-once.json', { 'gw-create': { url: api.url } },
    { url: ks.url, token: ks.clientToken });
  nodeRed = await serveHttpNodes();
  port = Number(new URL(nodeRed.url).port);
  gw = Gateway.create(ks, { destination: `${nodeRed.url}/stripe-events`, destinationSecret: secret.whsec });
});

after(async () => {
  await helper.unload();
  await nodeRed?.close();
  await api?.close();
  await ks?.stop();
});

const callsFor = (eventId) => api.calls.get(`stripe_invoice:${eventId}`) ?? 0;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(check, what, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await check();
    if (value) return value;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}`);
}

it('Stripe delivers one event 5 times at once: one forward, one invoice', { timeout: 120_000 }, async () => {
  const { id, body } = stripeEvent('burst');
  const answers = await Promise.all([1, 2, 3, 4, 5].map(() => gw.deliver(body)));
  assert.deepEqual(answers.map((a) => a.status).sort(), [200, 200, 200, 200, 202]);
  const delivered = await gw.waitState(id, 'delivered', 60_000);
  assert.deepEqual(delivered.attempts.map((a) => a.status_code), [201]);
  assert.equal(callsFor(id), 1);
});

it('Node-RED down while Stripe resends: the gateway keeps trying, and the flow acts once when it is back', { timeout: 240_000 }, async (t) => {
  const { id, body } = stripeEvent('outage');
  await nodeRed.close();
  try {
    const first = await Promise.all([gw.deliver(body), gw.deliver(body), gw.deliver(body)]);
    assert.deepEqual(first.map((a) => a.status).sort(), [200, 200, 202]);
    await waitFor(async () => (await gw.delivery(id)).attempts.length >= 2, 'two refused forwards', OUTAGE_MS);
    await sleep(OUTAGE_MS);
    const queued = await gw.delivery(id);
    assert.equal(queued.state, 'queued');
    assert.ok(queued.attempts.every((a) => a.error === 'no connection'), JSON.stringify(queued));
    assert.equal((await gw.deliver(body)).body.status, 'duplicate');
    assert.equal(callsFor(id), 0);
  } finally {
    nodeRed = await serveHttpNodes(port); // Node-RED is back, on its address
  }
  const delivered = await gw.waitState(id, 'delivered', SETTLE_MS);
  t.diagnostic(`forwards: ${delivered.attempts.map((a) => a.status_code ?? a.error).join(', ')}`);
  assert.equal(delivered.attempts.at(-1).status_code, 201);
  assert.equal(callsFor(id), 1);
  assert.equal((await gw.deliver(body)).status, 200, "Stripe's later resend");
  await sleep(1500); // a forward would start within 100 ms
  assert.equal((await gw.delivery(id)).attempts.length, delivered.attempts.length, 'not forwarded again');
  assert.equal(callsFor(id), 1);
});

it('a forward that times out is tried again, and an operator redelivers it: still one invoice', { timeout: 240_000 }, async (t) => {
  // this source waits 1 s for an answer; the invoice API takes 2.5 s
  const slow = Gateway.create(ks, { destination: `${nodeRed.url}/stripe-events`, destinationSecret: secret.whsec,
    name: 'stripe-slow', timeoutSeconds: 1 });
  const { id, body } = stripeEvent('slow');
  api.delayMs = 2500;
  let delivered;
  try {
    assert.equal((await slow.deliver(body)).status, 202);
    delivered = await slow.waitState(id, 'delivered', SETTLE_MS);
  } finally {
    api.delayMs = 0;
  }
  t.diagnostic(`forwards: ${delivered.attempts.map((a) => a.status_code ?? a.error).join(', ')}`);
  assert.equal(delivered.attempts[0].error, 'timeout');
  assert.equal(delivered.attempts.at(-1).status_code, 200, 'answered with the first forward\'s invoice');
  assert.equal(callsFor(id), 1);
  // the operator forwards it once more (same Idempotency-Key): the flow answers the stored invoice
  ks.cli('redeliver', '--tenant', ks.tenant, '--source', slow.name, '--event-id', id, '--force');
  const again = await waitFor(async () => {
    const d = await slow.delivery(id);
    return d.state === 'delivered' && d.attempts.length > delivered.attempts.length && d;
  }, 'the redelivery', 60_000);
  assert.equal(again.attempts.at(-1).status_code, 200);
  assert.equal(callsFor(id), 1);
});

it('a request not signed by the key store (wrong key, stale, tampered, none) is 401 and claims nothing', { timeout: 60_000 }, async () => {
  const { id, body } = stripeEvent('forged');
  const post = async (text, headers) => {
    const response = await fetch(`${nodeRed.url}/stripe-events`, { method: 'POST', body: text,
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': id, ...headers },
      signal: AbortSignal.timeout(30_000) });
    return [response.status, await response.json()];
  };
  const signedWith = (keyText, timestamp, signed = body) => ({ 'webhook-id': id, 'webhook-timestamp': String(timestamp),
    'webhook-signature': forwardSignature(keyText, id, timestamp, signed) });
  const now = Math.floor(Date.now() / 1000);
  for (const [text, headers] of [
    [body, signedWith(forwardSecret().hex, now)],
    [body, signedWith(secret.hex, now - 301)],
    [body.replace('4200', '9999'), signedWith(secret.hex, now)],
    [body, {}],
  ]) {
    assert.deepEqual(await post(text, headers), [401, { error: 'invalid_signature' }]);
  }
  assert.equal(callsFor(id), 0);
  const [status] = await ks.api('GET', `/v1/keys?scope=stripe_invoice&key=${id}`);
  assert.equal(status, 404, 'nothing was claimed');
  assert.equal((await post(body, signedWith(secret.hex, now)))[0], 201, 'signed as the gateway signs');
  assert.equal(callsFor(id), 1);
});
