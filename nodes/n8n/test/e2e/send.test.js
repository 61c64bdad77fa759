'use strict';
/**
 * Send Once in a real n8n (N8N_BIN, 2.8.4 in CI): the shipped example
 * examples/send-once-invoice.json, imported with the CLI and run twice by `n8n execute`,
 * against a real key store (its own: an operator makes the `billing` connection, a sealing
 * key seals its Authorization header) and a real invoices API on loopback
 * (test-support/downstream.js). The first run invoices order-1001 and gets order-1002 refused
 * (422) on the error output; the second run is all replays, and the API got each order once.
 */
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { KeyStore, KEYSTORE_BIN } = require('../support/keystore');
const { N8n, nodeOutputs, PACKAGE_DIR } = require('./n8n');
const { startDownstream } = require('../../../test-support/downstream');

const WORKFLOW = JSON.parse(fs.readFileSync(path.join(PACKAGE_DIR, 'examples/send-once-invoice.json'), 'utf8'));
const API_TOKEN = 'sk_test_only_in_the_key_store';
const NODE = 'Create Invoice Once';

let ks;
let api;
let n8n;

test.before(async () => {
	process.env.KEYSTORE_SECRET_KEY = execFileSync(KEYSTORE_BIN, ['secret-key'], { encoding: 'utf8' }).trim();
	[ks, api] = await Promise.all([KeyStore.start(), startDownstream()]);
	// as docs/platforms/n8n-node.md has the operator make it
	const [status, body] = await ks.api(
		'POST',
		'/v1/connections',
		{
			name: 'billing',
			base_url: `${api.url}/api`,
			headers: { Authorization: `Bearer ${API_TOKEN}` },
			idempotency_header: 'Idempotency-Key',
		},
		ks.operatorToken,
	);
	assert.equal(status, 201, JSON.stringify(body));
	// the invoices API refuses the negative total for good
	api.script('create_invoice:order-1002', { status: 422, body: { error: 'total must be positive' } });
	n8n = await N8n.create();
	await n8n.import(
		[{ id: 'ksExampleCredential', name: 'Idempotency Key Store', type: 'idempotencyKeyStoreApi', data: { url: ks.url, token: ks.clientToken } }],
		[WORKFLOW],
	);
});

test.after(async () => {
	if (n8n) console.log(`n8n timings (s): ${n8n.timings.map(([what, s]) => `${what} ${s}`).join(', ')}`);
	await n8n?.stop();
	await ks?.stop();
	await api?.close();
});

test('the example run twice: an invoice and a refusal, then their replays; the API got each order once', async () => {
	const first = await n8n.execute(WORKFLOW.id);
	const outputs = nodeOutputs(first, NODE);
	assert.deepEqual(outputs.map((items) => items.length), [1, 1], JSON.stringify(outputs));
	const [[invoiced], [refused]] = outputs;
	assert.deepEqual(
		[invoiced.order_id, invoiced.invoice.outcome, invoiced.invoice.status_code, invoiced.invoice.state],
		['order-1001', 'sent', 201, 'succeeded'],
		JSON.stringify(invoiced),
	);
	assert.equal(invoiced.invoice.resource_id, api.created[0].invoice.id, "the resource id, by the pointer /id");
	assert.deepEqual(
		[refused.error.reason, refused.error.outcome, refused.error.status_code, refused.error.key],
		['send_failed', 'failed', 422, 'order-1002'],
		JSON.stringify(refused),
	);
	assert.deepEqual(refused.error.result.body, { error: 'total must be positive' });
	assert.deepEqual(nodeOutputs(first, 'Refused or Try Later')[0].map((item) => item.error.key), ['order-1002']);

	const [got] = api.requestsFor('create_invoice:order-1001');
	assert.deepEqual(
		[got.method, got.path, got.headers.authorization, got.body],
		['POST', '/api/invoices', `Bearer ${API_TOKEN}`, { order_id: 'order-1001', customer: 'cus_42', total: 1250 }],
		'the connection adds the credentials and the idempotency header; n8n never held them',
	);

	const second = await n8n.execute(WORKFLOW.id);
	const [[again], [refusedAgain]] = nodeOutputs(second, NODE);
	assert.deepEqual([again.invoice.outcome, again.invoice.resource_id], ['replay', invoiced.invoice.resource_id]);
	assert.deepEqual([refusedAgain.error.outcome, refusedAgain.error.status_code], ['replay', 422]);
	assert.deepEqual(
		['order-1001', 'order-1002'].map((order) => api.requestsFor(`create_invoice:${order}`).length),
		[1, 1],
		'the second run sent nothing',
	);
});
