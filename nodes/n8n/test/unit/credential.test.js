'use strict';
// The credential's test (the nodes' testedBy function) against a real key store: GET /v1/whoami.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { KeyStore, freePort } = require('../support/keystore');
const { credentialTestContext, load } = require('../support/n8n-context');

const { testCredential } = load('nodes/shared/credentialTest.js');
const { IdempotencyGuard } = load('nodes/IdempotencyGuard/IdempotencyGuard.node.js');
const { IdempotencyKeyStore } = load('nodes/IdempotencyKeyStore/IdempotencyKeyStore.node.js');

let ks;
let other; // another service on loopback: answers 404 with its own JSON, like a wrong URL does
test.before(async () => {
	ks = await KeyStore.start();
	other = http.createServer((request, response) => {
		response.writeHead(404, { 'Content-Type': 'application/json' });
		response.end(JSON.stringify({ message: 'no such route' }));
	});
	await new Promise((resolve) => other.listen(0, '127.0.0.1', resolve));
});
test.after(async () => {
	await ks?.stop();
	other?.close();
});

const check = (url, token) => testCredential.call(credentialTestContext(), { data: { url, token } });

test('right URL and token pass, and say which tenant and role the token has', async () => {
	const result = await check(`${ks.url}/`, ks.clientToken);
	assert.equal(result.status, 'OK', result.message);
	assert.match(result.message, new RegExp(`tenant "${ks.tenant}", client token`));
	const operator = await check(ks.url, ks.operatorToken);
	assert.match(operator.message, /operator token/);
});

test('a wrong token fails: the key store refused it', async () => {
	const result = await check(ks.url, 'ks_wrong');
	assert.deepEqual([result.status, /refused this token/.test(result.message)], ['Error', true], result.message);
});

test('a Service URL ending in /v1 fails with the URL to use instead, whatever the token', async () => {
	for (const [url, token] of [[`${ks.url}/v1`, ks.clientToken], [`${ks.url}/v1/`, 'ks_wrong'], [`${ks.url}/V1`, ks.clientToken]]) {
		const result = await check(url, token);
		assert.equal(result.status, 'Error', url);
		assert.equal(result.message, `Remove /v1 from the Service URL: the nodes add it themselves. Use ${ks.url}`);
	}
});

test('an unreachable host, another service and a malformed URL fail, each saying so', async () => {
	const nobody = `http://127.0.0.1:${await freePort()}`; // a port nothing listens on
	const dead = await check(nobody, ks.clientToken);
	assert.deepEqual([dead.status, dead.message], ['Error', `The key store at ${nobody} did not answer (ECONNREFUSED).`]);
	const elsewhere = await check(`http://127.0.0.1:${other.address().port}`, ks.clientToken);
	assert.equal(elsewhere.status, 'Error');
	assert.match(elsewhere.message, /^No Idempotency Key Store answered at .* \(HTTP 404\)/);
	for (const url of ['127.0.0.1:8080', 'ftp://127.0.0.1', `${ks.url}/?x=1`, '', `${ks.url}/\r\nX-Injected: 1`, `${ks.url}/v\t1`]) {
		const result = await check(url, ks.clientToken);
		assert.equal(result.status, 'Error', url);
		assert.doesNotMatch(result.message, new RegExp(ks.clientToken), 'never the token in a message');
	}
});

test('both nodes name the test function, and the credential has no declarative test that would win', () => {
	for (const Node of [IdempotencyGuard, IdempotencyKeyStore]) {
		const node = new Node();
		const [credential] = node.description.credentials;
		assert.equal(node.methods.credentialTest[credential.testedBy], testCredential);
	}
	const { IdempotencyKeyStoreApi } = load('credentials/IdempotencyKeyStoreApi.credentials.js');
	assert.equal(new IdempotencyKeyStoreApi().test, undefined, "n8n runs a credential's own test before any testedBy");
});
