'use strict';
/**
 * The Guard while the key store is down (really stopped: connections refused), through an n8n
 * context. Never New without a claim; an error n8n's error output carries (On Error: Continue),
 * or a failed execution whose waiting webhook the Guard answers 503 itself (n8n would answer
 * 200 with an empty body, and the sender would not resend).
 */
const test = require('node:test');
const assert = require('node:assert/strict');
const { KeyStore } = require('../support/keystore');
const { run, load } = require('../support/n8n-context');

const { IdempotencyGuard } = load('nodes/IdempotencyGuard/IdempotencyGuard.node.js');

let ks;
let credentials;
test.before(async () => {
	ks = await KeyStore.start();
	credentials = { url: ks.url, token: ks.clientToken };
});
test.after(() => ks?.stop());

const params = (extra = {}) => ({
	scope: 'create_invoice',
	key: (json) => json.body.event_id,
	payloadMode: 'fields',
	payloadFields: 'body.amount',
	version: '',
	mode: 'single',
	waitSeconds: 0,
	claimOptions: {},
	outputField: 'idempotency',
	...extra,
});
const event = (event_id) => ({ body: { event_id, amount: 10 } });

async function whileDown(fn) {
	await ks.halt();
	try {
		return await fn();
	} finally {
		await ks.resume();
	}
}

for (const mode of ['single', 'batch']) {
	test(`${mode} mode, On Error: Continue: every item is an error item on Needs Attention, none on New`, async () => {
		const items = [event(`down-${mode}-1`), event(`down-${mode}-2`)];
		const [fresh, done, attention] = await whileDown(() =>
			run(IdempotencyGuard, { items, params: params({ mode }), credentials, continueOnFail: true }),
		);
		assert.equal(fresh.length + done.length, 0, 'nothing may reach the side effect without a claim');
		assert.deepEqual(
			attention.map((item) => [item.pairedItem.item, item.json.idempotency.reason, item.json.idempotency.retry]),
			[[0, 'unreachable', true], [1, 'unreachable', true]],
		);
		for (const item of attention) {
			assert.match(item.json.error.message, /did not answer/);
			assert.equal(item.json.body.event_id, items[item.pairedItem.item].body.event_id, "the item's own data stays");
		}
	});

	test(`${mode} mode, On Error: Continue (using error output): items n8n moves to the error output`, async () => {
		const items = [event(`down-${mode}-3`)];
		const [fresh, done, attention] = await whileDown(() =>
			run(IdempotencyGuard, { items, params: params({ mode }), credentials, continueOnFail: true, onError: 'continueErrorOutput' }),
		);
		assert.equal(fresh.length + done.length, 0);
		// n8n moves an item whose JSON is a lone `error` to the error output (and adds the input
		// item's fields there); the details must ride inside it
		assert.deepEqual(Object.keys(attention[0].json), ['error']);
		const { reason, retry, scope, key } = attention[0].json.error;
		assert.deepEqual([reason, retry, scope], ['unreachable', true, 'create_invoice']);
		assert.equal(key, `down-${mode}-3`);
		assert.equal(attention[0].error, undefined, 'n8n would replace the JSON of an item carrying an Error');
	});
}

test('the default (the execution fails): the Guard answers a waiting webhook 503 with Retry-After itself', async () => {
	const responses = [];
	await whileDown(() =>
		assert.rejects(run(IdempotencyGuard, { items: [event('down-stop')], params: params(), credentials, responses }), /did not answer/),
	);
	assert.equal(responses.length, 1);
	const [answer] = responses;
	assert.equal(answer.statusCode, 503);
	assert.equal(answer.headers['retry-after'], '30');
	assert.deepEqual(answer.body, { status: 'try_later', reason: 'unreachable' });
	assert.doesNotMatch(JSON.stringify(answer), /127\.0\.0\.1|ks_/, 'nothing about the key store reaches the sender');
	// after the restart the same event is claimed afresh: nothing was written during the outage
	const [[fresh]] = await run(IdempotencyGuard, { items: [event('down-stop')], params: params(), credentials });
	assert.equal(fresh.json.idempotency.attempt, 1);
});

test("an event the Guard cannot claim (no key) is answered 400, not 503: resending it cannot help", async () => {
	const responses = [];
	await assert.rejects(run(IdempotencyGuard, { items: [{ body: {} }], params: params(), credentials, responses }), /key is empty/);
	assert.deepEqual(
		responses.map((answer) => [answer.statusCode, answer.body]),
		[[400, { status: 'rejected', reason: 'invalid_item' }]],
	);
	const [, , [refused]] = await run(IdempotencyGuard, {
		items: [{ body: { event_id: 'x'.repeat(600), amount: 1 } }],
		params: params(),
		credentials,
		continueOnFail: true,
	});
	assert.deepEqual([refused.json.idempotency.reason, refused.json.idempotency.retry], ['invalid_request', false]);
});
