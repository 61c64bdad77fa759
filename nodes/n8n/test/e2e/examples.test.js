'use strict';
/**
 * End to end in a real n8n (N8N_BIN, 2.8.4 in CI) with a real key store and the effect sink:
 * the shipped example workflows, imported with the CLI, run by `n8n execute` (polling) and by
 * `n8n start` serving their webhooks on 127.0.0.1 (invoice).
 */
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { KeyStore } = require('../support/keystore');
const { N8n, nodeOutputs, PACKAGE_DIR } = require('./n8n');
const { Sink } = require('./sink');

const CREDENTIAL = { id: 'ksExampleCredential', name: 'Idempotency Key Store', type: 'idempotencyKeyStoreApi' };

function example(name) {
	return JSON.parse(fs.readFileSync(path.join(PACKAGE_DIR, 'examples', name), 'utf8'));
}

/** The invoice example as shipped, pointed at the sink. */
function invoiceWorkflow(sink) {
	const text = JSON.stringify(example('webhook-to-invoice.json'));
	return JSON.parse(text.replaceAll('https://billing.example.com', sink.url));
}

/**
 * The invoice workflow as docs/platforms/n8n-node.md builds it, without touching the Guard's settings:
 * its On Error is the default (the execution fails), so nothing in the workflow answers the
 * sender when the key store is down. Its own id and path, next to the shipped one.
 */
function defaultSettingsWorkflow(sink) {
	const workflow = invoiceWorkflow(sink);
	workflow.id = 'ksDocsInvoice1';
	workflow.name = 'Built from docs/platforms/n8n-node.md (default On Error)';
	for (const node of workflow.nodes) {
		node.id = node.id.replace('0b7f6f0e', '1c8e7f1f');
		if (node.name === 'Idempotency Guard') delete node.onError;
		if (node.type === 'n8n-nodes-base.webhook') {
			node.webhookId = '7b2e4d3f-6c8b-4d4a-9f1f-2e3d4c5b6a71';
			node.parameters.path = 'invoice-events-default';
		}
	}
	return workflow;
}

/**
 * docs/platforms/n8n-code.md behind a webhook: the shipped Code node snippet with SETTINGS
 * edited as the page says (key store URL and token written in, the key from the webhook's
 * body, the example action's target URL), the Code node's On Error set to "Continue (using
 * error output)" and that output answered 503, as the page's "When the key store is down" says.
 */
function codeNodeWorkflow(sink) {
	const snippet = fs
		.readFileSync(path.join(PACKAGE_DIR, '../../clients/snippets/n8n-code-node.js'), 'utf8')
		.replace("env('KEYSTORE_URL', 'http://127.0.0.1:8080')", JSON.stringify(ks.url))
		.replace("env('KEYSTORE_TOKEN', '')", JSON.stringify(ks.clientToken))
		.replace('keyOf: (item) => item.json.event_id,', 'keyOf: (item) => item.json.body.event_id,')
		.replace('payloadOf: (item) => item.json,', 'payloadOf: (item) => item.json.body,')
		.replace("env('TARGET_URL', 'https://billing.example.com/invoices')", JSON.stringify(`${sink.url}/invoices`));
	const respond = (id, name, position, body, code, headers = []) => ({
		id: `5d3c2b1a-0f9e-4d8c-b7a6-00000000000${id}`,
		name,
		type: 'n8n-nodes-base.respondToWebhook',
		typeVersion: 1.5,
		position,
		parameters: { respondWith: 'json', responseBody: body, options: { responseCode: code, responseHeaders: { entries: headers } } },
	});
	return {
		id: 'ksDocsCodeNode1',
		name: 'docs/platforms/n8n-code.md behind a webhook',
		nodes: [
			{
				id: '5d3c2b1a-0f9e-4d8c-b7a6-000000000001',
				name: 'Webhook',
				type: 'n8n-nodes-base.webhook',
				typeVersion: 2.1,
				position: [0, 0],
				webhookId: '8c3f5e4a-7d9c-4e5b-a0f2-3f4e5d6c7b82',
				parameters: { httpMethod: 'POST', path: 'code-invoice-events', responseMode: 'responseNode', options: {} },
			},
			{
				id: '5d3c2b1a-0f9e-4d8c-b7a6-000000000002',
				name: 'Exactly Once',
				type: 'n8n-nodes-base.code',
				typeVersion: 2,
				position: [240, 0],
				onError: 'continueErrorOutput',
				parameters: { mode: 'runOnceForAllItems', language: 'javaScript', jsCode: snippet },
			},
			respond(3, 'Respond: Done', [480, -100], '={{ JSON.stringify({ outcome: $json.keystore.outcome }) }}', 200),
			respond(4, 'Respond: Try Later', [480, 100], '={{ JSON.stringify({ status: "try_later" }) }}', 503, [
				{ name: 'Retry-After', value: '30' },
			]),
		],
		connections: {
			Webhook: { main: [[{ node: 'Exactly Once', type: 'main', index: 0 }]] },
			'Exactly Once': {
				main: [[{ node: 'Respond: Done', type: 'main', index: 0 }], [{ node: 'Respond: Try Later', type: 'main', index: 0 }]],
			},
		},
		settings: { executionOrder: 'v1' },
		pinData: {},
		active: false,
	};
}

function pollingWorkflow(sink) {
	const text = JSON.stringify(example('polling-claim-batch.json'))
		.replaceAll('https://shop.example.com', sink.url)
		.replaceAll('https://crm.example.com', sink.url);
	return JSON.parse(text);
}

let ks;
let sink;
let n8n;
let started = false;

test.before(async () => {
	[ks, sink] = await Promise.all([KeyStore.start(), new Sink().start()]);
	n8n = await N8n.create();
	const invoice = invoiceWorkflow(sink);
	const fromDocs = defaultSettingsWorkflow(sink);
	const codeNode = codeNodeWorkflow(sink);
	const workflows = [invoice, fromDocs, codeNode, pollingWorkflow(sink)];
	await n8n.import([{ ...CREDENTIAL, data: { url: ks.url, token: ks.clientToken } }], workflows);
	for (const { id } of [invoice, fromDocs, codeNode]) await n8n.publish(id);
});

test.after(async () => {
	if (n8n) console.log(`n8n timings (s): ${n8n.timings.map(([what, s]) => `${what} ${s}`).join(', ')}`);
	await n8n?.stop();
	await ks?.stop();
	await sink?.stop();
});

/** n8n start, once, after the CLI-only tests (they share the user folder and ports). */
async function ensureStarted() {
	if (!started) {
		await n8n.start();
		started = true;
	}
}

async function deliver(body, path = 'invoice-events') {
	const response = await fetch(`${n8n.url}/webhook/${path}`, {
		method: 'POST',
		headers: { 'Content-Type': 'application/json' },
		body: JSON.stringify(body),
		signal: AbortSignal.timeout(120_000),
	});
	const text = await response.text();
	let json;
	try {
		json = JSON.parse(text);
	} catch {
		assert.fail(`webhook answered ${response.status} with non-JSON: ${text.slice(0, 500)}\n${n8n.tail()}`);
	}
	return {
		status: response.status,
		body: json,
		replayed: response.headers.get('idempotent-replayed'),
		retryAfter: response.headers.get('retry-after'),
	};
}

const invoicesFor = (eventId) => sink.invoices.filter((invoice) => invoice.event_id === eventId);

test('polling: Claim Batch with versions syncs each order version once across overlapping runs', async () => {
	const id = 'ksExamplePolling1';
	const v1 = '2026-03-01T10:00:00Z';
	const v2 = '2026-03-01T10:07:00Z';
	sink.orders = [
		{ id: 'o-1', status: 'paid', total: 100, updated_at: v1 },
		{ id: 'o-2', status: 'open', total: 250, updated_at: v1 },
	];
	const first = await n8n.execute(id);
	assert.equal(nodeOutputs(first, 'Upsert in CRM')[0].length, 2);
	// the next run overlaps: o-1 unchanged, o-2 changed (newer updated_at), o-3 new
	sink.orders = [sink.orders[0], { id: 'o-2', status: 'paid', total: 250, updated_at: v2 }, { id: 'o-3', status: 'open', total: 40, updated_at: v2 }];
	const second = await n8n.execute(id);
	const [fresh, seen, attention] = nodeOutputs(second, 'Claim Batch');
	assert.deepEqual(fresh.map((item) => item.id), ['o-2', 'o-3']);
	assert.deepEqual(seen.map((item) => item.id), ['o-1']);
	assert.deepEqual(attention, []);
	assert.deepEqual(
		sink.upserts.map((upsert) => `${upsert.id}@${upsert.updated_at}`),
		[`o-1@${v1}`, `o-2@${v1}`, `o-2@${v2}`, `o-3@${v2}`],
	);
});

test('the same event twice: one invoice; the second run leaves on Already Done with the first id', async () => {
	await ensureStarted();
	const event = { event_id: 'evt-twice', customer_id: 'c-1', amount: 1250, currency: 'EUR' };
	const first = await deliver(event);
	assert.equal(first.status, 201, JSON.stringify(first.body));
	assert.equal(first.body.status, 'created');
	const second = await deliver(event);
	assert.deepEqual([second.status, second.body.status, second.replayed], [200, 'already_done', 'true']);
	assert.equal(second.body.invoice_id, first.body.invoice_id);
	assert.deepEqual(second.body.invoice, first.body.invoice, 'the stored result is the first invoice');
	assert.equal(invoicesFor('evt-twice').length, 1);
});

test('the same event with a changed amount: Needs Attention (fingerprint_mismatch), no second invoice', async () => {
	await ensureStarted();
	const event = { event_id: 'evt-changed', customer_id: 'c-2', amount: 500, currency: 'EUR' };
	assert.equal((await deliver(event)).status, 201);
	const changed = await deliver({ ...event, amount: 5000 });
	assert.deepEqual([changed.status, changed.body.status, changed.body.reason], [409, 'needs_attention', 'fingerprint_mismatch']);
	assert.equal(invoicesFor('evt-changed').length, 1);
	assert.equal(invoicesFor('evt-changed')[0].amount, 500, 'the original stays as it was');
});

test('the same webhook POSTed 5 times at once: one invoice', async (t) => {
	await ensureStarted();
	const event = { event_id: 'slow-burst', customer_id: 'c-3', amount: 75, currency: 'EUR' };
	const answers = await Promise.all(Array.from({ length: 5 }, () => deliver(event)));
	assert.equal(invoicesFor('slow-burst').length, 1);
	const created = answers.filter((answer) => answer.status === 201);
	assert.equal(created.length, 1, JSON.stringify(answers));
	const invoiceId = created[0].body.invoice_id;
	assert.equal(invoiceId, invoicesFor('slow-burst')[0].id);
	for (const answer of answers.filter((a) => a.status !== 201)) {
		// a duplicate waits for the first (the key store's wait_seconds) and gets its invoice
		// while the key store has a waiting seat for the token (two per worker here); without
		// one, when its claim races the first one's insert (the key store then answers
		// in_progress at once), or on a machine so slow that the first takes over the Guard's
		// 10 s wait, it is told to try later: 503 with Retry-After, never a person's matter
		const ok =
			(answer.status === 200 && answer.body.status === 'already_done' && answer.body.invoice_id === invoiceId) ||
			(answer.status === 503 && answer.body.status === 'try_later' && answer.body.reason === 'in_progress');
		assert.ok(ok, JSON.stringify(answer));
	}
	const retried = await Promise.all(answers.filter((a) => a.status === 503).map(() => deliver(event)));
	for (const answer of retried) assert.deepEqual([answer.status, answer.body.invoice_id], [200, invoiceId]);
	assert.equal(invoicesFor('slow-burst').length, 1);
	t.diagnostic(`burst answers: ${answers.map((a) => a.body.status).join(', ')}`);
});

test('a side effect with Retry On Fail that fails twice, then succeeds: one invoice', async () => {
	await ensureStarted();
	const event = { event_id: 'flaky-retry', customer_id: 'c-4', amount: 990, currency: 'EUR' };
	const first = await deliver(event);
	assert.equal(first.status, 201, JSON.stringify(first.body));
	assert.equal(sink.callsByKey.get('create_invoice:flaky-retry'), 3, 'two failures and one success');
	assert.equal(invoicesFor('flaky-retry').length, 1);
	const again = await deliver(event);
	assert.deepEqual([again.body.status, again.body.invoice_id], ['already_done', first.body.invoice_id]);
	assert.equal(sink.callsByKey.get('create_invoice:flaky-retry'), 3, 'the repeat never reached the invoice API');
});


test('the invoice API is down: Release on the error branch, and the next delivery creates it (attempt 2)', async () => {
	await ensureStarted();
	const event = { event_id: 'down-outage', customer_id: 'c-5', amount: 120, currency: 'EUR' };
	sink.outage = true;
	const failed = await deliver(event);
	assert.deepEqual([failed.status, failed.body.status], [503, 'failed'], JSON.stringify(failed.body));
	const [, released] = await ks.api('GET', '/v1/keys?scope=create_invoice&key=down-outage');
	assert.equal(released.record.state, 'released');
	sink.outage = false;
	const retried = await deliver(event);
	assert.equal(retried.status, 201, JSON.stringify(retried.body));
	const [, done] = await ks.api('GET', '/v1/keys?scope=create_invoice&key=down-outage');
	assert.deepEqual([done.record.state, done.record.attempt], ['succeeded', 2]);
	assert.equal(invoicesFor('down-outage').length, 1);
});

test('the key store is down: the sender gets 503 and resends; after the restart the resend creates one invoice', async () => {
	await ensureStarted();
	const event = { event_id: 'evt-keystore-down', customer_id: 'c-6', amount: 310, currency: 'EUR' };
	await ks.halt();
	let down;
	try {
		down = await deliver(event);
	} finally {
		await ks.resume();
	}
	assert.deepEqual([down.status, down.body.status, down.retryAfter], [503, 'try_later', '30'], JSON.stringify(down.body));
	assert.equal(invoicesFor('evt-keystore-down').length, 0, 'nothing was done without a claim');
	const [missing] = await ks.api('GET', '/v1/keys?scope=create_invoice&key=evt-keystore-down');
	assert.equal(missing, 404, 'nothing was claimed either');
	const resent = await deliver(event);
	assert.equal(resent.status, 201, JSON.stringify(resent.body));
	const again = await deliver(event);
	assert.deepEqual([again.status, again.body.invoice_id], [200, resent.body.invoice_id]);
	assert.equal(invoicesFor('evt-keystore-down').length, 1);
	// an event the Guard cannot claim (no id) goes the same way, answered 400: resending cannot help
	const noId = await deliver({ customer_id: 'c-6', amount: 1 });
	assert.deepEqual([noId.status, noId.body.status, noId.body.reason], [400, 'rejected', 'invalid_item']);
});

test("a workflow with the Guard's default On Error: the Guard itself answers 503 while the key store is down", async () => {
	await ensureStarted();
	const event = { event_id: 'evt-keystore-down-default', customer_id: 'c-8', amount: 5, currency: 'EUR' };
	await ks.halt();
	let down;
	try {
		down = await deliver(event, 'invoice-events-default');
	} finally {
		await ks.resume();
	}
	// without the Guard's own answer, n8n answers 200 with an empty body when the execution
	// fails before any Respond to Webhook node, and the sender never resends
	assert.deepEqual([down.status, down.body, down.retryAfter], [503, { status: 'try_later', reason: 'unreachable' }, '30']);
	const resent = await deliver(event, 'invoice-events-default');
	assert.equal(resent.status, 201, JSON.stringify(resent.body));
	assert.equal(invoicesFor('evt-keystore-down-default').length, 1);
});

test('the Code node recipe behind a webhook: 503 through its error output while the key store is down, then once', async () => {
	await ensureStarted();
	const event = { event_id: 'evt-code-node-down', customer_id: 'c-9', amount: 12, currency: 'EUR' };
	await ks.halt();
	let down;
	try {
		down = await deliver(event, 'code-invoice-events');
	} finally {
		await ks.resume();
	}
	assert.deepEqual([down.status, down.body.status, down.retryAfter], [503, 'try_later', '30'], JSON.stringify(down.body));
	assert.equal(invoicesFor('evt-code-node-down').length, 0);
	const resent = await deliver(event, 'code-invoice-events');
	const again = await deliver(event, 'code-invoice-events');
	assert.deepEqual([resent.status, resent.body.outcome, again.body.outcome], [200, 'acquired', 'replay'], JSON.stringify([resent, again]));
	assert.equal(invoicesFor('evt-code-node-down').length, 1);
});

test('the key store stops between claim and release: the failed Release still answers 503', async () => {
	await ensureStarted();
	const event = { event_id: 'down-release', customer_id: 'c-7', amount: 45, currency: 'EUR' };
	sink.outage = true;
	sink.onOutage = () => ks.halt(); // the invoice API fails, and meanwhile the key store stops
	let failed;
	try {
		failed = await deliver(event);
	} finally {
		sink.outage = false;
		sink.onOutage = undefined;
		await ks.resume();
	}
	assert.deepEqual([failed.status, failed.body.status, failed.retryAfter], [503, 'failed', '30'], JSON.stringify(failed.body));
	// the claim could not be given back: the record stays the first attempt's until its lease
	// runs out, and then goes to a person (never silently done, never done twice)
	const [, held] = await ks.api('GET', '/v1/keys?scope=create_invoice&key=down-release');
	assert.equal(held.record.state, 'in_progress');
	assert.equal(invoicesFor('down-release').length, 0);
});

test("the credential's test in n8n: a good token passes with its tenant; a bad token, a /v1 URL, a dead URL and another service fail", async () => {
	await ensureStarted();
	const headers = { 'Content-Type': 'application/json', 'browser-id': 'keystore-e2e' };
	const rest = async (route, body, cookie) => {
		const response = await fetch(`${n8n.url}/rest/${route}`, {
			method: 'POST',
			headers: cookie ? { ...headers, cookie } : headers,
			body: JSON.stringify(body),
			signal: AbortSignal.timeout(60_000),
		});
		assert.equal(response.status, 200, `${route}: ${response.status}`);
		return [await response.json(), response.headers.get('set-cookie')];
	};
	const [, setCookie] = await rest('owner/setup', {
		email: 'owner@example.com',
		firstName: 'Test',
		lastName: 'Owner',
		password: 'Keystore-e2e-1',
	});
	const cookie = setCookie.split(';')[0];
	const check = async (data) => {
		const [created] = await rest('credentials', { name: `ks ${crypto.randomUUID()}`, type: CREDENTIAL.type, data }, cookie);
		const credentials = { id: created.data.id, name: created.data.name, type: CREDENTIAL.type, data };
		const [tested] = await rest('credentials/test', { credentials }, cookie);
		return tested.data;
	};
	const good = await check({ url: `${ks.url}/`, token: ks.clientToken });
	assert.deepEqual([good.status, good.message], ['OK', `Connected: tenant "${ks.tenant}", client token "client-1".`]);
	const badToken = await check({ url: ks.url, token: 'ks_not_a_token' });
	assert.deepEqual([badToken.status, /refused this token/.test(badToken.message)], ['Error', true], badToken.message);
	// the base URL mistake the docs warn about, with a token the key store accepts
	const withV1 = await check({ url: `${ks.url}/v1`, token: ks.clientToken });
	assert.deepEqual([withV1.status, /Remove \/v1 from the Service URL/.test(withV1.message)], ['Error', true], withV1.message);
	const dead = await check({ url: 'http://127.0.0.1:9', token: ks.clientToken });
	assert.deepEqual([dead.status, /did not answer/.test(dead.message)], ['Error', true], dead.message);
	const elsewhere = await check({ url: sink.url, token: ks.clientToken }); // a 404 without error.code
	assert.deepEqual([elsewhere.status, /No Idempotency Key Store/.test(elsewhere.message)], ['Error', true], elsewhere.message);
});
