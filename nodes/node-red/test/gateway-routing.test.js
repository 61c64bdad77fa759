'use strict';
/**
 * One Stripe endpoint feeding two flows by event type (issue 29; docs/webhooks/recipes.md,
 * "One Stripe endpoint, two workflows by event type"): a `stripe-routed` source of a real
 * `keystore serve`, made with `keystore source create --destinations`, forwards `invoice.*`
 * to one copy of the shipped flow examples/gateway-exactly-once.json (http in
 * /stripe-invoices) and `payment_intent.*` to another (/stripe-payments), over real HTTP.
 * Each event runs the flow of its type once; a type neither takes runs none; the invoices
 * flow answering 503 with Retry-After pauses only its destination, never the payments.
 */
const { it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const http = require('node:http');
const { KeyStore, KEYSTORE_BIN } = require('../../test-support/keystore-server');
const { Gateway, forwardSecret, stripeEvent } = require('../../test-support/gateway');
const { helper, serveHttpNodes, NODES } = require('./support');

const EXAMPLE = require('../examples/gateway-exactly-once.json');

/** The invoice and payment APIs: calls per "<path> <Idempotency-Key>"; `failing` 500s. */
async function startApi() {
  const api = { calls: new Map(), failing: new Set() };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      const call = `${req.url} ${req.headers['idempotency-key']}`;
      api.calls.set(call, (api.calls.get(call) ?? 0) + 1);
      const status = api.failing.has(req.url) ? 500 : 201;
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ id: `DOC-${api.calls.size}`, ...JSON.parse(body) }));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  api.url = `http://127.0.0.1:${server.address().port}`;
  api.close = () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); });
  return api;
}

/** The example flow under ids of its own (`prefix-`), listening on `path`, calling `apiUrl`. */
function copyOf(prefix, path, apiUrl, store) {
  const flow = JSON.parse(JSON.stringify(EXAMPLE).replaceAll('"gw-', `"${prefix}-`));
  for (const node of flow) {
    if (node.type === 'http in') node.url = path;
    if (node.id === `${prefix}-create`) node.url = apiUrl;
    if (node.type === 'keystore-config') Object.assign(node, { url: store.url, timeout: '30' });
  }
  return flow;
}

let ks;
let api;
let nodeRed;
let gw;

before(async () => {
  process.env.KEYSTORE_SECRET_KEY = execFileSync(KEYSTORE_BIN, ['secret-key'], { encoding: 'utf8' }).trim();
  const secret = forwardSecret();
  process.env.KEYSTORE_FORWARD_SECRET = secret.whsec;
  [ks, api] = await Promise.all([KeyStore.start(), startApi()]);
  const store = { url: ks.url, token: ks.clientToken };
  const flows = [...copyOf('inv', '/stripe-invoices', `${api.url}/invoices`, store),
    ...copyOf('pay', '/stripe-payments', `${api.url}/payments`, store)];
  const credentials = Object.fromEntries(flows.filter((n) => n.type === 'keystore-config')
    .map((n) => [n.id, { token: store.token }]));
  await helper.load(NODES, flows, credentials);
  nodeRed = await serveHttpNodes();
  gw = Gateway.create(ks, {
    name: 'stripe-routed',
    destinations: [
      { name: 'invoices', url: `${nodeRed.url}/stripe-invoices`, secret: secret.whsec,
        filter: { event_types: ['invoice.*'] } },
      { name: 'payments', url: `${nodeRed.url}/stripe-payments`, secret: secret.whsec,
        filter: { event_types: ['payment_intent.*'] } },
    ],
  });
});

after(async () => {
  await helper.unload();
  await nodeRed?.close();
  await api?.close();
  await ks?.stop();
});

const calls = (path, eventId) => api.calls.get(`${path} stripe_invoice:${eventId}`) ?? 0;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

it('each event runs the flow of its type once; a type neither takes runs none', { timeout: 120_000 }, async () => {
  const invoice = stripeEvent('routed_invoice', 'invoice.paid');
  const payment = stripeEvent('routed_payment', 'payment_intent.succeeded');
  const other = stripeEvent('routed_customer', 'customer.created');
  for (const { body } of [invoice, payment, other]) assert.equal((await gw.deliver(body)).status, 202);
  assert.equal((await gw.deliver(invoice.body)).body.status, 'duplicate', "Stripe's resend");

  const sent = await gw.waitState(invoice.id, 'delivered', 60_000, 'invoices');
  assert.deepEqual(sent.attempts.map((a) => a.status_code), [201]);
  assert.equal((await gw.waitState(payment.id, 'delivered', 60_000, 'payments')).attempts[0].status_code, 201);
  for (const [id, destination] of [[invoice.id, 'payments'], [payment.id, 'invoices'],
    [other.id, 'invoices'], [other.id, 'payments']]) {
    const filtered = await gw.waitState(id, 'filtered', 60_000, destination);
    assert.deepEqual(filtered.attempts, [], `${id} was not sent to ${destination}`);
  }
  assert.deepEqual([calls('/invoices', invoice.id), calls('/payments', invoice.id)], [1, 0]);
  assert.deepEqual([calls('/payments', payment.id), calls('/invoices', payment.id)], [1, 0]);
  assert.equal([...api.calls.keys()].filter((k) => k.endsWith(other.id)).length, 0);
  // the event's record (the gateway's own claim) succeeded with nothing sent
  const [status, body] = await ks.api('GET', `/v1/keys?scope=hook:stripe-routed&key=${other.id}`,
    undefined, ks.operatorToken);
  assert.equal(status, 200);
  assert.equal(body.record.state, 'succeeded');
});

it('the invoices flow asking to wait (503, Retry-After) pauses only its destination', { timeout: 120_000 }, async (t) => {
  api.failing.add('/invoices');
  const invoice = stripeEvent('paused_invoice', 'invoice.paid');
  assert.equal((await gw.deliver(invoice.body)).status, 202);
  const deadline = Date.now() + 60_000;
  let waiting = await gw.delivery(invoice.id, 'invoices');
  while (!waiting.attempts.some((a) => a.status_code === 503) && Date.now() < deadline) {
    await sleep(100);
    waiting = await gw.delivery(invoice.id, 'invoices');
  }
  assert.equal(waiting.state, 'queued', JSON.stringify(waiting));
  assert.deepEqual(waiting.attempts.map((a) => a.status_code), [503]);
  const [, shown] = await ks.api('GET', '/v1/sources/stripe-routed', undefined, ks.operatorToken);
  const paused = Object.fromEntries(shown.source.destinations.map((d) => [d.name, d.paused_until]));
  assert.ok(paused.invoices && !paused.payments, JSON.stringify(paused));

  // while invoices waits its 30 s, a payment goes through at once
  const payment = stripeEvent('during_pause', 'payment_intent.succeeded');
  const started = Date.now();
  assert.equal((await gw.deliver(payment.body)).status, 202);
  await gw.waitState(payment.id, 'delivered', 20_000, 'payments');
  t.diagnostic(`payment delivered ${Date.now() - started} ms after its acceptance`);
  assert.equal((await gw.delivery(invoice.id, 'invoices')).state, 'queued');
  assert.equal(calls('/payments', payment.id), 1);

  api.failing.delete('/invoices');
  const delivered = await gw.waitState(invoice.id, 'delivered', 90_000, 'invoices');
  t.diagnostic(`invoice forwards: ${delivered.attempts.map((a) => a.status_code ?? a.error).join(', ')}`);
  assert.equal(delivered.attempts.at(-1).status_code, 201);
  await sleep(500);
  assert.equal(calls('/invoices', invoice.id), 2, 'the failed call, then the one after the pause');
});
