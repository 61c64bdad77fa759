'use strict';
// Send Once: the answer mapping as pure functions, and execute() through an n8n context
// against a real key store (its own: an operator makes the connection, a sealing key seals its
// headers) and a real invoices API on loopback (test-support/downstream.js).
const test = require('node:test');
const { describe, before, after } = test;
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const { KeyStore, KEYSTORE_BIN } = require('../support/keystore');
const { run, load } = require('../support/n8n-context');
const { startDownstream } = require('../../../test-support/downstream');

const contract = load('nodes/shared/contract.js');
const { IdempotencyKeyStore } = load('nodes/IdempotencyKeyStore/IdempotencyKeyStore.node.js');

const API_TOKEN = 'sk_test_only_in_the_key_store';
const record = (state, result = null) => ({ scope: 's', key: 'k', state, result });

test('sendAnswerOf takes an outcome only under its status; a replay of a failure is a refusal', () => {
	const result = { status_code: 201, resource_id: 'in_1', body: { id: 'in_1' } };
	assert.equal(contract.sendAnswerOf(201, { outcome: 'sent', result, record: record('succeeded') }).result.resource_id, 'in_1');
	assert.equal(contract.sendAnswerOf(200, { outcome: 'sent', result, record: record('succeeded') }), undefined);
	assert.equal(contract.sendAnswerOf(202, { outcome: 'accepted', result, record: record('in_progress') }).result, null);
	assert.equal(contract.sendAnswerOf(409, { error: { code: 'in_progress' } }), undefined);
	const replay = contract.sendAnswerOf(200, { outcome: 'replay', record: record('failed', { status_code: 422 }) });
	assert.deepEqual([replay.result.status_code, contract.sendRefused(replay)], [422, true], "a replay without result takes the record's");
	assert.equal(contract.sendRefused(contract.sendAnswerOf(200, { outcome: 'replay', record: record('succeeded') })), false);
});

describe('Send Once against a real key store and API', () => {
	let ks;
	let api;
	let credentials;
	before(async () => {
		process.env.KEYSTORE_SECRET_KEY = execFileSync(KEYSTORE_BIN, ['secret-key'], { encoding: 'utf8' }).trim();
		[ks, api] = await Promise.all([KeyStore.start(), startDownstream()]);
		credentials = { url: ks.url, token: ks.clientToken };
		const [status, body] = await ks.api(
			'POST',
			'/v1/connections',
			{
				name: 'billing',
				base_url: `${api.url}/api`,
				headers: { Authorization: `Bearer ${API_TOKEN}` },
				idempotency_header: 'Idempotency-Key',
				retry_window_seconds: 60,
			},
			ks.operatorToken,
		);
		assert.equal(status, 201, JSON.stringify(body));
		// an API without an idempotency header, and no check: an unknown outcome goes to a person
		const [plain, answer] = await ks.api(
			'POST',
			'/v1/connections',
			{ name: 'billing-plain', base_url: `${api.url}/api`, idempotency_header: null, retry_window_seconds: 60 },
			ks.operatorToken,
		);
		assert.equal(plain, 201, JSON.stringify(answer));
	});
	after(async () => {
		await ks?.stop();
		await api?.close();
	});

	let counter = 0;
	const unique = (prefix) => `${prefix}-${process.pid}-${++counter}`;

	function sendOnce(items, extra = {}, options = {}) {
		return run(IdempotencyKeyStore, {
			items,
			params: {
				operation: 'sendOnce',
				outputField: 'idempotency',
				connection: 'billing',
				scope: 'create_invoice',
				key: (json) => json.order,
				method: 'POST',
				path: '/invoices',
				sendBody: true,
				jsonBody: (json) => ({ order: json.order, total: json.total }),
				resourceIdPointer: '/id',
				sendWait: (json) => json.wait ?? 10,
				sendPayload: 'body',
				sendHeaders: '{}',
				...extra,
			},
			credentials,
			...options,
		});
	}

	test('sent, then its replay, then a refusal and its replay; the API got each order once', async () => {
		const [paid, refused] = [unique('order'), unique('order')];
		api.script(`create_invoice:${refused}`, { status: 422, body: { error: 'total must be positive' } });
		const items = [{ order: paid, total: 10 }, { order: paid, total: 10 }, { order: refused, total: -1 }, { order: refused, total: -1 }];
		const [out] = await sendOnce(items, {}, { continueOnFail: true, onError: 'continueErrorOutput' });
		const [sent, replay, failed, failedAgain] = out.map((item) => item.json);
		assert.deepEqual(
			[sent.idempotency.outcome, sent.idempotency.status_code, sent.idempotency.state],
			['sent', 201, 'succeeded'],
			JSON.stringify(sent),
		);
		assert.equal(sent.idempotency.resource_id, sent.idempotency.result.body.id);
		assert.equal(sent.order, paid, "the item's own fields pass through");
		assert.deepEqual([replay.idempotency.outcome, replay.idempotency.resource_id], ['replay', sent.idempotency.resource_id]);
		for (const [item, outcome] of [[failed, 'failed'], [failedAgain, 'replay']]) {
			assert.deepEqual(Object.keys(item), ['error'], 'a lone error: n8n puts it on the error output');
			assert.deepEqual([item.error.reason, item.error.outcome, item.error.status_code], ['send_failed', outcome, 422]);
			assert.deepEqual(item.error.result.body, { error: 'total must be positive' });
		}
		const [got] = api.requestsFor(`create_invoice:${paid}`);
		assert.deepEqual([got.path, got.headers.authorization, got.body], ['/api/invoices', `Bearer ${API_TOKEN}`, { order: paid, total: 10 }]);
		assert.deepEqual([api.requestsFor(`create_invoice:${paid}`).length, api.requestsFor(`create_invoice:${refused}`).length], [1, 1]);
	});

	test('a slow API: accepted, in_progress while it runs, a replay once settled; another body is fingerprint_mismatch', async () => {
		const order = unique('order');
		api.script(`create_invoice:${order}`, { create: true, status: 201, delayMs: 3000 });
		const [[accepted]] = await sendOnce([{ order, total: 10, wait: 0 }]);
		assert.deepEqual([accepted.json.idempotency.outcome, accepted.json.idempotency.result], ['accepted', null]);
		await assert.rejects(sendOnce([{ order, total: 10, wait: 0 }]), (error) => {
			assert.equal(error.context.keystoreCode, 'in_progress', error.message);
			return true;
		});
		const [status, looked] = await ks.api('GET', `/v1/keys?scope=create_invoice&key=${encodeURIComponent(order)}&wait=20`);
		assert.deepEqual([status, looked.record.state], [200, 'succeeded']);
		const [[replay]] = await sendOnce([{ order, total: 10 }]);
		assert.deepEqual([replay.json.idempotency.outcome, replay.json.idempotency.status_code], ['replay', 201]);
		await assert.rejects(sendOnce([{ order, total: 99 }]), (error) => error.context.keystoreCode === 'fingerprint_mismatch');
		assert.equal(api.requestsFor(`create_invoice:${order}`).length, 1);
	});

	test('an unknown connection and a bad body are errors of the item; nothing is sent', async () => {
		const order = unique('order');
		await assert.rejects(sendOnce([{ order, total: 1 }], { connection: 'no-such-api' }), (error) => error.context.keystoreCode === 'not_found');
		await assert.rejects(sendOnce([{ order, total: 1 }], { jsonBody: '{not json' }), (error) => error.context.keystoreCode === 'invalid_item');
		const [[kept]] = await sendOnce([{ order, total: 1 }], { path: 'invoices' }, { continueOnFail: true });
		assert.match(kept.json.error, /invalid_request/, 'the key store refuses a path without its leading /');
		assert.equal(api.requestsFor(`create_invoice:${order}`).length, 0);
	});

	test('an API that answers 500 with no idempotency header and no check: needs_reconciliation, also on a repeat', async () => {
		const order = unique('order');
		api.script(order, { status: 500, body: { error: 'internal' } });
		const params = { connection: 'billing-plain', jsonBody: (json) => ({ reference: json.order, total: json.total }) };
		for (let run = 0; run < 2; run++) {
			await assert.rejects(sendOnce([{ order, total: 10 }], params), (error) => {
				assert.equal(error.context.keystoreCode, 'needs_reconciliation', error.message);
				return true;
			});
		}
		assert.equal(api.requestsFor(order).length, 1, 'never a blind retry');
	});
});
