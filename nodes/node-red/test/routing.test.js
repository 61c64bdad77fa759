'use strict';
/** Where the guard sends what the key store answers, and what goes to Catch nodes. */
const { it, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const { helper, loadFlow, waitUntil, eventId, keystore } = require('./support');
const { startDropProxy } = require('../../test-support/drop-proxy');

afterEach(() => helper.unload());

async function lookup(scope, key) {
  const url = `${keystore.url}/v1/keys?scope=${scope}&key=${encodeURIComponent(key)}`;
  return (await fetch(url, { headers: { Authorization: `Bearer ${keystore.token}` } }).then((r) => r.json())).record;
}

function guardFlow({ waitSeconds = '0' } = {}) {
  return [
    { id: 'guard', type: 'keystore-guard', server: 'ks', scope: 'send_sms', key: 'topic',
      keyType: 'msg', payload: 'payload', payloadType: 'msg', leaseSeconds: '60',
      onStale: 'reconcile', waitSeconds, wires: [['new'], ['replayed'], ['attention']] },
    { id: 'complete', type: 'keystore-complete', server: 'ks', state: 'succeeded',
      resourceId: 'sms-1', resourceIdType: 'str', statusCode: '', statusCodeType: 'none',
      body: '', bodyType: 'none', wires: [['completed']] },
    { id: 'catcher', type: 'catch', scope: null, wires: [['errors']] },
    ...['new', 'replayed', 'attention', 'completed', 'errors'].map((id) => ({ id, type: 'helper' })),
  ];
}

function collectAll(flow) {
  return Object.fromEntries(['new', 'replayed', 'attention', 'completed', 'errors']
    .map((id) => [id, flow.collect(id)]));
}

it('keeps the token out of the flow, in the credentials', async () => {
  const flow = await loadFlow(guardFlow());
  assert.equal(flow.get('ks').credentials.token.startsWith('ks_'), true);
  assert.equal(helper._redNodes.getFlows().flows.some((n) => 'token' in n), false);
});

it('sends a repeat with another payload to "Needs attention"', async () => {
  const flow = await loadFlow(guardFlow());
  const out = collectAll(flow);
  const topic = eventId('sms');
  flow.get('guard').receive({ topic, payload: { to: '+100', text: 'hello' } });
  await waitUntil(() => out.new.length === 1, 'the first claim');
  flow.get('complete').receive(out.new[0]);
  await waitUntil(() => out.completed.length === 1, 'the completion');

  flow.get('guard').receive({ topic, payload: { to: '+100', text: 'HELLO' } });
  await waitUntil(() => out.attention.length === 1, 'the mismatch');

  assert.equal(out.attention[0].keystore.outcome, 'fingerprint_mismatch');
  assert.equal(out.attention[0].keystore.record.result.resource_id, 'sms-1', 'first result kept');
  assert.equal(out.errors.length, 0);
});

it('reports "still in progress" to Catch nodes when told not to wait', async () => {
  const flow = await loadFlow(guardFlow({ waitSeconds: '0' }));
  const out = collectAll(flow);
  const topic = eventId('sms');
  flow.get('guard').receive({ topic, payload: { text: 'one' } });
  await waitUntil(() => out.new.length === 1, 'the first claim');

  flow.get('guard').receive({ topic, payload: { text: 'one' } });
  await waitUntil(() => out.errors.length === 1, 'the error');

  const caught = out.errors[0];
  assert.equal(caught.keystore.outcome, 'in_progress');
  assert.ok(caught.keystore.retry_after >= 1 && caught.keystore.retry_after <= 60);
  assert.equal(caught.error.source.id, 'guard');
});

it('reports a refused token to Catch nodes', async () => {
  const flow = await loadFlow(guardFlow(), { token: 'ks_never-issued' });
  const out = collectAll(flow);
  flow.get('guard').receive({ topic: eventId('sms'), payload: {} });
  await waitUntil(() => out.errors.length === 1, 'the error');
  assert.equal(out.errors[0].keystore.outcome, 'unauthorized');
  assert.equal(out.new.length + out.replayed.length + out.attention.length, 0);
});

it('refuses to complete a message that holds no lease', async () => {
  const flow = await loadFlow(guardFlow());
  const out = collectAll(flow);
  flow.get('complete').receive({ payload: 'not from a guard' });
  await waitUntil(() => out.errors.length === 1, 'the error');
  assert.match(out.errors[0].error.message, /no lease token/);
});

it('waits for a running copy in one request (the key store\'s wait), counted once', async () => {
  const proxy = await startDropProxy(keystore.url);
  try {
    const flow = await loadFlow(guardFlow({ waitSeconds: '20' }), { url: proxy.url });
    const out = collectAll(flow);
    const topic = eventId('sms');
    flow.get('guard').receive({ topic, payload: { text: 'one' } });
    await waitUntil(() => out.new.length === 1, 'the first claim');
    flow.get('guard').receive({ topic, payload: { text: 'one' } }); // the copy: held by the key store
    await new Promise((resolve) => setTimeout(resolve, 1000));
    flow.get('complete').receive(out.new[0]);
    await waitUntil(() => out.replayed.length === 1, 'the copy, after the first completed');
    assert.equal(out.replayed[0].keystore.result.resource_id, 'sms-1');
    assert.deepEqual(proxy.seen, { '/v1/claim': 2, '/v1/complete': 1 }, 'no lookups, no claim-again loop');
    assert.equal((await lookup('send_sms', topic)).duplicate_count, 1);
    assert.equal(out.errors.length + out.attention.length, 0);
  } finally {
    await proxy.close();
  }
});

it('sends a claim whose answer was lost once more, with its lease token: it resumes ("new", attempt 1)', async () => {
  const proxy = await startDropProxy(keystore.url);
  try {
    const flow = await loadFlow(guardFlow(), { url: proxy.url });
    const out = collectAll(flow);
    const topic = eventId('sms');
    proxy.dropNext('/v1/claim'); // the claim lands; its answer never comes back
    flow.get('guard').receive({ topic, payload: { text: 'one' } });
    await waitUntil(() => out.new.length + out.errors.length === 1, 'the claim');
    assert.equal(out.errors.length, 0);
    assert.equal(proxy.seen['/v1/claim'], 2);
    const { keystore: claimed } = out.new[0];
    assert.deepEqual([claimed.outcome, claimed.attempt, claimed.resumed], ['acquired', 1, true]);
    flow.get('complete').receive(out.new[0]);
    await waitUntil(() => out.completed.length === 1, 'the completion');
    const record = await lookup('send_sms', topic);
    assert.deepEqual([record.state, record.attempt], ['succeeded', 1]);
  } finally {
    await proxy.close();
  }
});
