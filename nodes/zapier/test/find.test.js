'use strict';
/** "Find Operation Key": a lookup, optionally waiting for a running attempt to finish. */
const { it } = require('node:test');
const assert = require('node:assert/strict');
const { App, run, itemId } = require('./support');

const SCOPE = 'sync_contact';

it('finds nothing for an unknown key', async () => {
  assert.deepEqual(await run(App.searches.find_operation, { scope: SCOPE, key: itemId('none') }), []);
});

it('waits for a running attempt and returns the result it completed with', async () => {
  const key = itemId('contact');
  const claim = await run(App.creates.claim, { scope: SCOPE, key, lease_seconds: '60' });

  const waiting = run(App.searches.find_operation, { scope: SCOPE, key, wait_seconds: '20' });
  // Complete a little later, so that without the wait the lookup would see `in_progress`.
  await new Promise((resolve) => setTimeout(resolve, 500));
  await run(App.creates.complete, { scope: SCOPE, key, lease_token: claim.lease_token,
    state: 'succeeded', resource_id: 'contact-7', result_body: { email: 'a@example.com' } });
  const [found] = await waiting;

  assert.equal(found.state, 'succeeded');
  assert.equal(found.result_resource_id, 'contact-7');
  assert.deepEqual(found.result_body, { email: 'a@example.com' });
});

it('without a wait, shows a running attempt as in progress', async () => {
  const key = itemId('contact');
  await run(App.creates.claim, { scope: SCOPE, key, lease_seconds: '60' });
  const [found] = await run(App.searches.find_operation, { scope: SCOPE, key });
  assert.equal(found.state, 'in_progress');
  assert.equal(found.result_resource_id, null);
});
