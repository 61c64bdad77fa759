'use strict';
/**
 * A Zap while the key store is down: every step fails in the way Zapier re-runs later
 * (ThrottledError, 30 s at least), never succeeds silently, and after the key store is back
 * the same trigger item is done once. A key store of the test's own, really stopped and
 * started again (nodes/test-support/keystore-server.js); the app runs in createAppTester.
 */
const { it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { KeyStore } = require('../../test-support/keystore-server');
const { startSink, sendEffect } = require('../../test-support/sink');
const { App, run, itemId, rejection } = require('./support');

const SCOPE = 'create_invoice';
let ks;
let sink;
let auth;
before(async () => {
  [ks, sink] = await Promise.all([KeyStore.start(), startSink()]);
  auth = { url: ks.url, token: ks.clientToken };
});
after(async () => {
  await sink.close();
  await ks.stop();
});

async function whileDown(fn) {
  await ks.halt();
  try {
    return await fn();
  } finally {
    await ks.resume();
  }
}

function assertRetriedLater(error, what) {
  assert.equal(error.name, 'ThrottledError', `${what}: ${JSON.stringify(error)}`);
  assert.equal(error.delay, 30, `${what}: half a minute, not a retry storm`);
  assert.match(error.message, new RegExp(`^The key store at ${ks.url} did not answer \\(ECONNREFUSED\\)`));
}

it('every step fails to be run again later while the key store is down; afterwards the item is done once', async () => {
  const key = itemId('order');
  const claimInput = { scope: SCOPE, key, payload: { amount: '75' } };
  const before = sink.effects.length;
  await whileDown(async () => {
    assertRetriedLater(await rejection(run(App.creates.claim, claimInput, auth)), 'claim');
    assertRetriedLater(await rejection(run(App.searches.find_operation, { scope: SCOPE, key }, auth)), 'find');
    assertRetriedLater(await rejection(run(App.creates.release, { scope: SCOPE, key, lease_token: 'lt_x' }, auth)), 'release');
  });
  assert.equal(sink.effects.length, before, 'no step let the Zap go on to the side effect');

  // Zapier runs the claim again after the delay: the key store is back
  const claim = await run(App.creates.claim, claimInput, auth);
  assert.deepEqual([claim.outcome, claim.attempt], ['acquired', 1], 'nothing was written during the outage');
  const effect = await sendEffect(sink.url, { key });
  // the key store goes down again before Complete: that step too is run again later
  const completeInput = { scope: SCOPE, key, lease_token: claim.lease_token, state: 'succeeded', resource_id: effect.body.id };
  assertRetriedLater(await whileDown(() => rejection(run(App.creates.complete, completeInput, auth))), 'complete');
  const completed = await run(App.creates.complete, completeInput, auth);
  assert.equal(completed.state, 'succeeded');
  const replay = await run(App.creates.claim, claimInput, auth);
  assert.deepEqual([replay.outcome, replay.is_new, replay.result_resource_id], ['replay', false, effect.body.id]);
  assert.equal(sink.effects.length - before, 1, 'one effect');
});

it('a proxy answering 502/503/504 without the key store behind it is retried later too', async () => {
  const proxy = http.createServer((req, res) => {
    res.writeHead(Number(req.url.split('/')[1]) || 502, { 'Content-Type': 'text/html' });
    res.end('<html><body>Bad Gateway</body></html>');
  });
  await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  try {
    for (const status of [502, 503, 504]) {
      const url = `http://127.0.0.1:${proxy.address().port}/${status}`;
      const error = await rejection(run(App.creates.claim, { scope: SCOPE, key: itemId('order') }, { url, token: 'ks_x' }));
      assert.deepEqual([error.name, error.delay], ['ThrottledError', 30], `HTTP ${status}`);
      assert.match(error.message, new RegExp(`answered HTTP ${status} without the key store`));
    }
    // any other answer that is not the key store's stays an error with its status
    const other = await rejection(run(App.creates.claim, { scope: SCOPE, key: 'k' }, { url: `http://127.0.0.1:${proxy.address().port}/500`, token: 'ks_x' }));
    assert.deepEqual([other.name, other.code], ['AppError', 'http_500']);
  } finally {
    proxy.close();
  }
});
