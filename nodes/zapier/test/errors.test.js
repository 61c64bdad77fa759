'use strict';
/**
 * How the key store's answers become Zapier's behaviour: retry later, halt for a person, or
 * an error with the key store's code.
 */
const { it } = require('node:test');
const assert = require('node:assert/strict');
const { App, run, authData, itemId, rejection } = require('./support');
const { startDropProxy } = require('../../test-support/drop-proxy');

const SCOPE = 'send_email';
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

it('retries a claim later (ThrottledError) while another run holds the lease', async () => {
  const key = itemId('mail');
  const first = await run(App.creates.claim, { scope: SCOPE, key, lease_seconds: '120' });

  const error = await rejection(run(App.creates.claim, { scope: SCOPE, key }));

  assert.equal(error.name, 'ThrottledError');
  assert.ok(error.delay >= 1 && error.delay <= 120, `delay ${error.delay} is the lease time left`);
  assert.match(error.message, /still working on this operation/);
  // Zapier runs the step again after the delay; by then the first run has completed.
  await run(App.creates.complete, { scope: SCOPE, key, lease_token: first.lease_token,
    state: 'succeeded', resource_id: 'msg-1' });
  const again = await run(App.creates.claim, { scope: SCOPE, key });
  assert.equal(again.outcome, 'replay');
  assert.equal(again.result_resource_id, 'msg-1');
});

it('halts for a person when an earlier attempt ran out of lease with an unknown outcome', async () => {
  const key = itemId('mail');
  await run(App.creates.claim, { scope: SCOPE, key, lease_seconds: '1', on_stale: 'reconcile' });
  await sleep(1500); // the lease is time-based: let 1 s run out (any longer wait is as good)

  const error = await rejection(run(App.creates.claim, { scope: SCOPE, key }));

  assert.equal(error.name, 'HaltedError');
  assert.match(error.message, /Resolve it in the key store/);
});

it('fails with the key store code when a completion comes from a replaced attempt', async () => {
  const key = itemId('mail');
  const stale = await run(App.creates.claim, { scope: SCOPE, key, lease_seconds: '1', on_stale: 'retry' });
  await sleep(1500); // let the first lease run out, so the next claim replaces it
  const fresh = await run(App.creates.claim, { scope: SCOPE, key });
  assert.equal(fresh.attempt, 2);

  const error = await rejection(run(App.creates.complete, { scope: SCOPE, key,
    lease_token: stale.lease_token, state: 'succeeded' }));

  assert.equal(error.name, 'AppError');
  assert.equal(error.code, 'lease_lost');
  assert.equal(error.status, 409);
});

it('fails with invalid_request for a scope the key store refuses', async () => {
  const error = await rejection(run(App.creates.claim, { scope: 'no spaces allowed', key: 'k' }));
  assert.equal(error.code, 'invalid_request');
  assert.equal(error.status, 400);
});

it('asks the key store to wait for a running attempt: one request, counted once, its result', async () => {
  const proxy = await startDropProxy(authData.url);
  try {
    const key = itemId('mail');
    const first = await run(App.creates.claim, { scope: SCOPE, key, lease_seconds: '120' });
    setTimeout(() => run(App.creates.complete, { scope: SCOPE, key, lease_token: first.lease_token,
      state: 'succeeded', resource_id: 'msg-9' }), 1000);
    const waited = await run(App.creates.claim, { scope: SCOPE, key, wait_seconds: '15' },
      { ...authData, url: proxy.url });
    assert.deepEqual([waited.route, waited.is_new, waited.result_resource_id], ['already_done', false, 'msg-9']);
    assert.equal(waited.duplicate_count, 1, 'the waiting duplicate is counted once');
    assert.deepEqual(proxy.seen, { '/v1/claim': 1 }, 'no lookups, no claim-again loop');
    // what is sent: whole seconds, at most 20 (a Zapier step has about 30 s), else no wait
    for (const [asked, sent] of [['45', 20], ['20', 20], ['3.9', 3], ['', undefined], ['0', undefined],
      ['-5', undefined], ['abc', undefined], ['\u0663', undefined]]) {
      await run(App.creates.claim, { scope: SCOPE, key: itemId('mail'), wait_seconds: asked },
        { ...authData, url: proxy.url });
      assert.equal(proxy.bodies['/v1/claim'].at(-1).wait_seconds, sent, `wait_seconds "${asked}"`);
    }
    const held = await run(App.creates.claim, { scope: SCOPE, key: itemId('mail') });
    const started = Date.now();
    const error = await rejection(run(App.creates.claim, { scope: SCOPE, key: held.key, wait_seconds: '1' }));
    assert.equal(error.name, 'ThrottledError');
    assert.ok(Date.now() - started >= 900, 'the key store waited the second');
  } finally {
    await proxy.close();
  }
});

it('sends a claim whose answer was lost once more, with its lease token: it resumes (attempt 1)', async () => {
  const proxy = await startDropProxy(authData.url);
  try {
    const key = itemId('mail');
    proxy.dropNext('/v1/claim'); // the claim lands; its answer never comes back
    const claimed = await run(App.creates.claim, { scope: SCOPE, key }, { ...authData, url: proxy.url });
    assert.equal(proxy.seen['/v1/claim'], 2);
    assert.deepEqual([claimed.route, claimed.attempt, claimed.resumed], ['new', 1, true]);
    const done = await run(App.creates.complete, { scope: SCOPE, key, lease_token: claimed.lease_token,
      state: 'succeeded' });
    assert.deepEqual([done.state, done.attempt], ['succeeded', 1]);
  } finally {
    await proxy.close();
  }
});
