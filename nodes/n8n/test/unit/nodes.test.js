'use strict';
// The two nodes' execute() against a real key store (started here), through an n8n context.
const test = require('node:test');
const assert = require('node:assert/strict');
const { KeyStore } = require('../support/keystore');
const { run, load } = require('../support/n8n-context');
const { startDropProxy } = require('../../../test-support/drop-proxy');

const { IdempotencyGuard } = load('nodes/IdempotencyGuard/IdempotencyGuard.node.js');
const { IdempotencyKeyStore } = load('nodes/IdempotencyKeyStore/IdempotencyKeyStore.node.js');

let ks;
let credentials;
test.before(async () => {
	ks = await KeyStore.start();
	credentials = { url: `${ks.url}/`, token: ks.clientToken }; // a trailing slash is fine
});
test.after(() => ks?.stop());

let counter = 0;
const unique = (prefix) => `${prefix}-${process.pid}-${++counter}`;

const guardParams = (extra = {}) => ({
	scope: 'create_invoice',
	key: (json) => json.body.event_id,
	payloadMode: 'fields',
	payloadFields: 'body.amount, body.customer',
	version: '',
	mode: 'single',
	waitSeconds: 0,
	claimOptions: {},
	outputField: 'idempotency',
	...extra,
});

const event = (event_id, amount = 1250) => ({ headers: { 'x-request-id': unique('r') }, body: { event_id, amount, customer: 'c-1' } });

function guard(items, extra, options = {}) {
	return run(IdempotencyGuard, { items, params: guardParams(extra), credentials, ...options });
}

function keyStore(operation, items, params, options = {}) {
	return run(IdempotencyKeyStore, {
		items,
		params: { operation, outputField: 'idempotency', ...params },
		credentials,
		...options,
	});
}

const fromGuard = {
	scope: (json) => json.idempotency.scope,
	key: (json) => json.idempotency.key,
	leaseToken: (json) => json.idempotency.lease_token,
};

test('Guard -> Complete -> repeat: New, then Already Done with the first result, mismatch to Needs Attention', async () => {
	const id = unique('evt');
	const [fresh, done, attention] = await guard([event(id)]);
	assert.equal(done.length + attention.length, 0);
	assert.equal(fresh.length, 1);
	const info = fresh[0].json.idempotency;
	assert.equal(info.route, 'new');
	assert.match(info.lease_token, /^lt_/);
	assert.equal(info.attempt, 1);
	assert.deepEqual(fresh[0].pairedItem, { item: 0 });
	assert.equal(fresh[0].json.body.event_id, id, "the item's own data passes through");

	const invoice = { id: 'INV-1', amount: 1250 };
	const [[completed]] = await keyStore('complete', [{ ...invoice, idempotency: info }], {
		...fromGuard,
		state: 'succeeded',
		resourceId: (json) => json.id,
		statusCode: 201,
		resultBody: 'item',
	});
	assert.equal(completed.json.idempotency.state, 'succeeded');
	assert.equal(completed.json.idempotency.record.result.resource_id, 'INV-1');

	// the same event again (other headers: the chosen fields ignore them), a changed amount,
	// and a new event, in one execution: one item on each output, pairing kept
	const [again, replayed, refused] = await guard([event(id), event(id, 9999), event(unique('evt'))]);
	assert.deepEqual(
		replayed.map((item) => [item.pairedItem.item, item.json.idempotency.result.resource_id]),
		[[0, 'INV-1']],
	);
	assert.deepEqual(replayed[0].json.idempotency.result.body, { ...invoice, idempotency: info });
	assert.equal(replayed[0].json.idempotency.record.duplicate_count, 1);
	assert.deepEqual(
		refused.map((item) => [item.pairedItem.item, item.json.idempotency.reason]),
		[[1, 'fingerprint_mismatch']],
	);
	assert.equal(refused[0].json.idempotency.record.result.resource_id, 'INV-1', 'the original stays intact');
	assert.deepEqual(again.map((item) => item.pairedItem.item), [2]);
});

test('Guard asks the key store to wait for a running attempt: one claim, counted once, its result', async () => {
	const id = unique('evt');
	const [[first]] = await guard([event(id)]);
	const lease = first.json.idempotency.lease_token;
	const started = Date.now();
	const later = new Promise((resolve) => setTimeout(resolve, 1500)).then(() =>
		ks.api('POST', '/v1/complete', {
			scope: 'create_invoice',
			key: id,
			lease_token: lease,
			state: 'succeeded',
			result: { resource_id: 'INV-W' },
		}),
	);
	const calls = [];
	const [fresh, done, attention] = await guard([event(id)], { waitSeconds: 20 }, { calls });
	const [status] = await later;
	assert.equal(status, 200);
	assert.equal(fresh.length + attention.length, 0);
	assert.equal(done[0].json.idempotency.result.resource_id, 'INV-W');
	assert.ok(Date.now() - started < 15_000, 'answered when the first attempt finished, not at the end of the wait');
	// the wait is the key store's (wait_seconds): no lookups, no claim-again loop
	assert.deepEqual(
		calls.map((call) => [call.method, new URL(call.url).pathname, call.body.wait_seconds]),
		[['POST', '/v1/claim', 20]],
	);
	assert.equal(done[0].json.idempotency.record.duplicate_count, 1, 'the waiting duplicate is counted once');
	// what is sent for a Wait that an expression made: whole seconds, at most 30, else none
	for (const [asked, sent] of [[300, 30], [2.7, 2], [0, undefined], [-4, undefined], [Number.NaN, undefined], ['abc', undefined]]) {
		const sentCalls = [];
		await guard([event(unique('evt'))], { waitSeconds: asked }, { calls: sentCalls });
		assert.equal(sentCalls[0].body.wait_seconds, sent, `waitSeconds ${asked}`);
	}
});

test('a claim whose answer was lost is sent again with its lease token and resumes (New, attempt 1)', async () => {
	const proxy = await startDropProxy(ks.url);
	try {
		const id = unique('evt');
		proxy.dropNext('/v1/claim');
		const calls = [];
		const viaProxy = { url: proxy.url, token: ks.clientToken };
		const [fresh, done, attention] = await guard([event(id)], {}, { calls, credentials: viaProxy });
		assert.equal(proxy.seen['/v1/claim'], 2, 'applied, its answer lost, sent again');
		assert.equal(done.length + attention.length, 0);
		const info = fresh[0].json.idempotency;
		assert.deepEqual([info.route, info.attempt, info.resumed], ['new', 1, true]);
		assert.equal(calls[0].body.lease_token, calls[1].body.lease_token, 'the same proposed token');
		assert.equal(info.lease_token, calls[0].body.lease_token);
		// anybody else meets the live lease; the holder completes it
		await assert.rejects(guard([event(id)]), /in_progress/);
		const [[completed]] = await keyStore('complete', [fresh[0].json], { ...fromGuard, state: 'succeeded', resultBody: 'none' });
		assert.equal(completed.json.idempotency.state, 'succeeded');
		// a batch whose answer was lost resumes item by item
		proxy.dropNext('/v1/claim/batch');
		const [batched] = await guard([event(unique('evt'))], { mode: 'batch' }, { credentials: viaProxy });
		assert.equal(proxy.seen['/v1/claim/batch'], 2);
		assert.deepEqual([batched[0].json.idempotency.attempt, batched[0].json.idempotency.resumed], [1, true]);
	} finally {
		await proxy.close();
	}
});

test("Guard: still running after the wait -> try later (the node's error); stale lease -> needs_reconciliation", async () => {
	const id = unique('evt');
	await guard([event(id)], { claimOptions: { leaseSeconds: 3 } });
	const started = Date.now();
	const responses = [];
	await assert.rejects(
		guard([event(id)], { waitSeconds: 1 }, { responses }),
		(error) => error.constructor.name === 'NodeApiError' && /in_progress/.test(error.message),
	);
	assert.ok(Date.now() - started >= 900, 'the key store waited the second');
	assert.deepEqual([responses[0].statusCode, responses[0].body], [503, { status: 'try_later', reason: 'in_progress' }]);
	// On Error: Continue (using error output): on the error output, with `retry`
	const [, , errored] = await guard([event(id)], {}, { continueOnFail: true, onError: 'continueErrorOutput' });
	assert.deepEqual(Object.keys(errored[0].json), ['error']);
	assert.deepEqual([errored[0].json.error.reason, errored[0].json.error.retry], ['in_progress', true]);
	await new Promise((resolve) => setTimeout(resolve, 3200)); // let the 3 s lease run out
	const [, , stale] = await guard([event(id)]);
	assert.equal(stale[0].json.idempotency.reason, 'needs_reconciliation');
});

test('Release on the error branch lets the next delivery try again (attempt 2)', async () => {
	const id = unique('evt');
	const [[first]] = await guard([event(id)]);
	const [[released]] = await keyStore('release', [{ error: { message: 'invoice API 503' }, ...first.json }], {
		...fromGuard,
		reason: (json) => json.error.message,
	});
	assert.equal(released.json.idempotency.state, 'released');
	const [[again]] = await guard([event(id)]);
	assert.equal(again.json.idempotency.attempt, 2);
	// the first lease is dead now: completing with it is refused as lease_lost
	await assert.rejects(
		keyStore('complete', [first.json], { ...fromGuard, state: 'succeeded', resultBody: 'none' }),
		(error) => error.constructor.name === 'NodeApiError' && /lease_lost/.test(error.message),
	);
});

test('Extend records a checkpoint; Lookup finds, waits and reports a missing key without failing', async () => {
	const id = unique('evt');
	const [[first]] = await guard([event(id)]);
	const [[extended]] = await keyStore('extend', [first.json], {
		...fromGuard,
		leaseSeconds: 600,
		checkpoint: 'invoice_created',
		checkpointResourceId: 'INV-9',
	});
	assert.deepEqual(
		[extended.json.idempotency.record.checkpoint.step, extended.json.idempotency.record.checkpoint.resource_id],
		['invoice_created', 'INV-9'],
	);
	const lookupParams = { scope: 'create_invoice', key: (json) => json.key, wait: 0 };
	const [[missing, found]] = await keyStore('lookup', [{ key: unique('none') }, { key: id }], lookupParams);
	assert.deepEqual([missing.json.idempotency.found, missing.json.idempotency.code], [false, 'not_found']);
	assert.equal(found.json.idempotency.state, 'in_progress');
	setTimeout(() => {
		ks.api('POST', '/v1/complete', { scope: 'create_invoice', key: id, lease_token: first.json.idempotency.lease_token, state: 'failed' });
	}, 1000);
	const [[waited]] = await keyStore('lookup', [{ key: id }], { ...lookupParams, wait: 10 });
	assert.equal(waited.json.idempotency.state, 'failed');
});

test('Expire needs the operator token; then the next claim starts afresh', async () => {
	const id = unique('evt');
	const [[first]] = await guard([event(id)]);
	await keyStore('complete', [first.json], { ...fromGuard, state: 'succeeded', resultBody: 'none' });
	const params = { scope: 'create_invoice', key: id };
	await assert.rejects(keyStore('expire', [{}], params), /forbidden/);
	const [[failed]] = await keyStore('expire', [{}], params, { continueOnFail: true });
	assert.match(failed.json.error, /forbidden/);
	const [[expired]] = await keyStore('expire', [{}], params, { credentials: { url: ks.url, token: ks.operatorToken } });
	assert.ok(Date.parse(expired.json.idempotency.record.expires_at) <= Date.now());
	const [[again]] = await guard([event(id)]);
	assert.equal(again.json.idempotency.attempt, 1);
});

test('Claim returns every outcome on the item; payload modes decide what a repeat is', async () => {
	const id = unique('evt');
	const params = { scope: 'sync', key: id, payloadMode: 'wholeItem', version: '', claimOptions: {} };
	const [[a, b, c]] = await keyStore('claim', [{ n: 1 }, { n: 1 }, { n: 2 }], params);
	assert.deepEqual(
		[a.json.idempotency.outcome, b.json.idempotency.outcome, c.json.idempotency.outcome],
		['acquired', 'in_progress', 'fingerprint_mismatch'],
	);
	const [[none]] = await keyStore('claim', [{ n: 3 }], { ...params, payloadMode: 'none' });
	assert.equal(none.json.idempotency.outcome, 'in_progress', 'no fingerprint matches any record');
	const [[ready]] = await keyStore('claim', [{}], { ...params, key: unique('fp'), payloadMode: 'fingerprint', fingerprint: 'v1:abc' });
	assert.equal(ready.json.idempotency.record.fingerprint, 'v1:abc');
});

test('a failing Guard releases the leases it acquired in the same execution', async () => {
	const good = unique('evt');
	await assert.rejects(
		guard([event(good), event('x'.repeat(600))]),
		(error) => error.constructor.name === 'NodeApiError' && /invalid_request/.test(error.message),
	);
	const [status, body] = await ks.api('GET', `/v1/keys?scope=create_invoice&key=${good}`);
	assert.equal(status, 200);
	assert.equal(body.record.state, 'released');
	// with "continue on fail" the bad item goes to Needs Attention as an error item instead:
	// its own data, and `error` and the output field saying why (the Needs Attention branch reads
	// idempotency.reason) and that resending it cannot help
	const long = event('x'.repeat(600));
	const [fresh, , attention] = await guard([event(unique('evt')), long], {}, { continueOnFail: true });
	assert.equal(fresh.length, 1);
	assert.deepEqual(
		attention.map((item) => [item.pairedItem.item, item.json.idempotency.reason, item.json.idempotency.retry]),
		[[1, 'invalid_request', false]],
	);
	assert.match(attention[0].json.error.message, /invalid_request/);
	assert.deepEqual(attention[0].json.body, long.body);
});

test('a wrong token or an unreachable key store fails the node with a clear message', async () => {
	await assert.rejects(guard([event(unique('evt'))], {}, { credentials: { url: ks.url, token: 'ks_wrong' } }), /unauthorized/);
	await assert.rejects(guard([event(unique('evt'))], {}, { credentials: { url: 'http://127.0.0.1:9', token: 'x' } }), /did not answer/);
	await assert.rejects(guard([{ body: {} }]), /key is empty/);
});

test('Claim Batch and Guard batch mode with versions (POST /v1/claim/batch)', async () => {
	const scope = unique('poll');
	const rows = [
		{ id: 'r1', updated_at: '2026-03-01T10:00:00Z', total: 10 },
		{ id: 'r2', updated_at: '2026-03-01T10:00:00Z', total: 20 },
	];
	const params = {
		scope,
		key: (json) => json.id,
		payloadMode: 'fields',
		payloadFields: 'total',
		version: (json) => json.updated_at,
		mode: 'batch',
		waitSeconds: 0,
		claimOptions: {},
		outputField: 'idempotency',
	};
	const [fresh] = await run(IdempotencyGuard, { items: rows, params, credentials });
	assert.deepEqual(fresh.map((item) => item.pairedItem.item), [0, 1]);
	for (const item of fresh) {
		await keyStore('complete', [item.json], { ...fromGuard, state: 'succeeded', resultBody: 'none' });
	}
	// the next poll overlaps: r1 unchanged, r2 changed (newer version), r3 new, r3 twice
	const next = [rows[0], { ...rows[1], updated_at: '2026-03-01T11:00:00Z', total: 25 }, { id: 'r3', updated_at: '2026-03-01T11:00:00Z', total: 5 }];
	const [[a, b, c]] = await keyStore('claimBatch', next, params);
	assert.deepEqual(
		[a.json.idempotency.outcome, b.json.idempotency.outcome, c.json.idempotency.outcome],
		['replay', 'acquired', 'acquired'],
	);
	assert.equal(b.json.idempotency.record.version, '2026-03-01T11:00:00Z');
	// held by the Claim Batch above: try later, the node's error (On Error: Continue puts
	// error items on Needs Attention, with the code as reason and `retry`)
	await assert.rejects(run(IdempotencyGuard, { items: [...next, next[2]], params, credentials }), /in_progress/);
	const [newer, done, attention] = await run(IdempotencyGuard, { items: [...next, next[2]], params, credentials, continueOnFail: true });
	assert.deepEqual(done.map((item) => item.pairedItem.item), [0]);
	assert.deepEqual(newer.length, 0, 'r2 and r3 are held by the Claim Batch above');
	assert.deepEqual(
		attention.map((item) => [item.pairedItem.item, item.json.idempotency.outcome, item.json.idempotency.reason, item.json.idempotency.retry]),
		[
			[1, 'error', 'in_progress', true],
			[2, 'error', 'in_progress', true],
			[3, 'error', 'in_progress', true],
		],
	);
	// a version of the other kind (a number for a timestamped record) is refused alone
	const [, , refused] = await run(IdempotencyGuard, { items: [{ ...rows[0], updated_at: 7 }, rows[0]], params, credentials });
	assert.deepEqual(
		refused.map((item) => [item.pairedItem.item, item.json.idempotency.outcome, item.json.idempotency.reason]),
		[[0, 'refused', 'invalid_request']],
	);
});
