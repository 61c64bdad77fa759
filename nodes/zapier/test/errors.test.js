'use strict';
/**
 * How the key store's answers become Zapier's behaviour: retry later, halt for a person, or
 * an error with the key store's code.
 */
const { it } = require('node:test');
const assert = require('node:assert/strict');
const { App, run, itemId, rejection } = require('./support');

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
