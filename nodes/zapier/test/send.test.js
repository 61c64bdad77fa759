'use strict';
/**
 * "Send Once", run by Zapier's own runner against a real key store of its own (with an
 * operator token, to create the connection) and a real downstream API on 127.0.0.1: the
 * request goes out once per key, with the connection's credentials and idempotency header,
 * and each answer of POST /v1/send ends the step as docs/outcomes.md says.
 */
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { KeyStore } = require('../../test-support/keystore-server');
const { startDownstream } = require('./downstream');
const { App, itemId, rejection } = require('./support');
const zapier = require('zapier-platform-core');

const appTester = zapier.createAppTester(App);
const SECRET = 'Bearer downstream-secret-42';
const SCOPE = 'create_invoice';
let ks;
let api;
let auth;

before(async () => {
  [ks, api] = await Promise.all([KeyStore.start({ tenant: 'zapier-send' }), startDownstream()]);
  auth = { url: ks.url, token: ks.clientToken };
  const [status, body] = await ks.api('POST', '/v1/connections', {
    name: 'billing', base_url: `${api.url}/v2`, headers: { Authorization: SECRET },
    idempotency_header: 'Idempotency-Key', timeout_seconds: 5,
  }, ks.operatorToken);
  assert.equal(status, 201, JSON.stringify(body));
});
after(async () => {
  await api?.close();
  await ks?.stop();
});

const send = (inputData) => appTester(App.creates.send_once.operation.perform,
  { authData: auth, inputData: { scope: SCOPE, connection: 'billing', method: 'POST', ...inputData } });

describe('Send Once', () => {
  it('sends once, and a repeat of the step gets the first answer back', async () => {
    const key = itemId('order');
    const input = { key, path: `/invoices/${key}`, body_json: '{"customer": "acme", "total": 1250}',
      payload: { customer: 'acme', total: '1250' }, resource_id_pointer: '/id' };

    const first = await send(input);
    const again = await send(input);

    assert.deepEqual([first.outcome, first.replayed, first.status_code], ['sent', false, 201]);
    assert.equal(first.resource_id, `${key}-1`);
    assert.deepEqual(first.body, { id: `${key}-1` });
    assert.equal(first.state, 'succeeded');
    assert.deepEqual([again.outcome, again.replayed, again.resource_id], ['replay', true, `${key}-1`]);
    const got = api.to(`/v2/invoices/${key}`);
    assert.equal(got.length, 1, 'one request for two runs');
    assert.deepEqual(JSON.parse(got[0].body), { customer: 'acme', total: 1250 });
    assert.equal(got[0].headers['idempotency-key'], `${SCOPE}:${key}`);
    assert.equal(got[0].headers.authorization, SECRET);
  });

  it('halts on a permanent refusal, and on every repeat of it, without sending again', async () => {
    const key = itemId('order');
    const path = `/invoices/${key}`;
    api.script(`/v2${path}`, 422, { error: 'total must be positive' });
    const input = { key, path, body: { total: '-1' }, payload: { total: '-1' } };

    const error = await rejection(send(input));
    const again = await rejection(send(input));

    assert.equal(error.name, 'HaltedError');
    assert.match(error.message, /refused the request .* for good \(HTTP 422\): \{"error":"total must be positive"\}/);
    assert.equal(again.name, 'HaltedError');
    assert.equal(api.to(`/v2${path}`).length, 1);
  });

  it('throttles while the API has not answered, and the rerun replays the answer', async () => {
    const key = itemId('order');
    const path = `/invoices/${key}`;
    api.script(`/v2${path}`, 201, { id: 'slow-1' }, 2500);
    const input = { key, path, body: { n: '1' }, resource_id_pointer: '/id', wait_seconds: '0' };

    const accepted = await rejection(send(input));
    const running = await rejection(send(input));

    assert.equal(accepted.name, 'ThrottledError');
    assert.match(accepted.message, /queued the request/);
    assert.equal(running.name, 'ThrottledError'); // accepted again, or in_progress
    const [status, found] = await ks.api('GET', `/v1/keys?scope=${SCOPE}&key=${key}&wait=15`);
    assert.equal(status, 200);
    assert.equal(found.record.state, 'succeeded');
    const rerun = await send(input);
    assert.deepEqual([rerun.outcome, rerun.resource_id], ['replay', 'slow-1']);
    assert.equal(api.to(`/v2${path}`).length, 1);
  });

  it('halts the same key with another payload for review', async () => {
    const key = itemId('order');
    await send({ key, path: `/invoices/${key}`, payload: { total: '5' } });
    const error = await rejection(send({ key, path: `/invoices/${key}`, payload: { total: '6' } }));
    assert.equal(error.name, 'HaltedError');
    assert.match(error.message, /already used with a different payload/);
    assert.equal(api.to(`/v2/invoices/${key}`).length, 1);
  });

  it('fails Body (JSON) that is not JSON and a method it cannot send, before any request', async () => {
    const before = api.got.length;
    const bad = await rejection(send({ key: itemId('k'), path: '/x', body_json: '{"total": ' }));
    assert.deepEqual([bad.code, bad.status], ['invalid_request', 400]);
    assert.match(bad.message, /Body \(JSON\) is not valid JSON/);
    const get = await rejection(send({ key: itemId('k'), path: '/x', method: 'GET' }));
    assert.deepEqual([get.code, get.status], ['invalid_request', 400]);
    assert.equal(api.got.length, before);
  });

  it('names an unknown connection', async () => {
    const error = await rejection(send({ key: itemId('k'), path: '/x', connection: 'nowhere' }));
    assert.equal(error.code, 'not_found');
    assert.match(error.message, /no connection named 'nowhere'/);
  });
});
