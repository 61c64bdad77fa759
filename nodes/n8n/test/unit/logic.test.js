'use strict';
// The nodes' pure logic: reading claim answers, building payloads and versions, routing.
const test = require('node:test');
const assert = require('node:assert/strict');
const { load } = require('../support/n8n-context');

const contract = load('nodes/shared/contract.js');
const fp = load('nodes/shared/fingerprint.js');
const routing = load('nodes/shared/routing.js');
const { batchEntryOf, newLeaseToken } = load('nodes/shared/keystore.js');

const record = (state, extra = {}) => ({ scope: 's', key: 'k', state, result: null, ...extra });

test('claimAnswerOf reads each of the five outcomes, and nothing else', () => {
	const acquired = contract.claimAnswerOf({ outcome: 'acquired', lease_token: 'lt_1', attempt: 2, record: record('in_progress') });
	assert.equal(acquired.lease_token, 'lt_1');
	assert.equal(acquired.attempt, 2);
	assert.equal(contract.claimAnswerOf({ outcome: 'replay', record: record('succeeded') }).outcome, 'replay');
	const busy = contract.claimAnswerOf(
		{ outcome: 'in_progress', record: record('in_progress'), error: { code: 'in_progress', message: 'm', details: { retry_after_seconds: 7 } } },
		{},
	);
	assert.equal(busy.retry_after_seconds, 7);
	assert.equal(busy.error.code, 'in_progress');
	const fromHeader = contract.claimAnswerOf({ outcome: 'in_progress', record: record('in_progress') }, { 'retry-after': '3' });
	assert.equal(fromHeader.retry_after_seconds, 3);
	for (const outcome of ['needs_reconciliation', 'fingerprint_mismatch']) {
		assert.equal(contract.claimAnswerOf({ outcome, record: record('in_progress') }).outcome, outcome);
	}
	// not claim answers: errors of the request, an unknown outcome, acquired without a token
	assert.equal(contract.claimAnswerOf({ error: { code: 'unauthorized', message: 'x', details: {} } }), undefined);
	assert.equal(contract.claimAnswerOf({ outcome: 'maybe', record: record('in_progress') }), undefined);
	assert.equal(contract.claimAnswerOf({ outcome: 'acquired', record: record('in_progress') }), undefined);
	assert.equal(contract.claimAnswerOf('<html>'), undefined);
});

test('errorOf reads the error object of docs/api.md and ignores other bodies', () => {
	assert.deepEqual(contract.errorOf({ error: { code: 'lease_lost', message: 'gone' } }), { code: 'lease_lost', message: 'gone', details: {} });
	assert.equal(contract.errorOf({ error: 'flat string' }), undefined);
	assert.equal(contract.errorOf(null), undefined);
});

test('pickFields keys values by path, missing fields are null, arrays index by number', () => {
	const item = { body: { amount: 1250, customer: { id: 'c1' }, lines: [{ sku: 'A' }] }, headers: { 'x-id': 'r1' } };
	assert.deepEqual(fp.pickFields(item, fp.parseFieldList('body.amount, body.customer.id\nbody.lines.0.sku, body.missing')), {
		'body.amount': 1250,
		'body.customer.id': 'c1',
		'body.lines.0.sku': 'A',
		'body.missing': null,
	});
	assert.throws(() => fp.pickFields(item, []), fp.InputError);
});

test('fingerprintPart sends a payload, a ready fingerprint, or nothing', () => {
	const item = { a: 1, b: { c: 2 } };
	assert.deepEqual(fp.fingerprintPart('wholeItem', item, {}), { payload: item });
	assert.deepEqual(fp.fingerprintPart('fields', item, { fields: 'b.c' }), { payload: { 'b.c': 2 } });
	assert.deepEqual(fp.fingerprintPart('custom', item, { custom: '{"x": [1, 2]}' }), { payload: { x: [1, 2] } });
	assert.deepEqual(fp.fingerprintPart('custom', item, { custom: 'plain text' }), { payload: 'plain text' });
	assert.deepEqual(fp.fingerprintPart('custom', item, { custom: { y: true } }), { payload: { y: true } });
	assert.deepEqual(fp.fingerprintPart('fingerprint', item, { fingerprint: 'sha1:abc' }), { fingerprint: 'sha1:abc' });
	assert.deepEqual(fp.fingerprintPart('none', item, {}), {});
	assert.throws(() => fp.fingerprintPart('fingerprint', item, { fingerprint: '' }), fp.InputError);
});

test('versionOf: exact integers as numbers, timestamps as strings, unsafe integers refused', () => {
	assert.equal(fp.versionOf(''), undefined);
	assert.equal(fp.versionOf(null), undefined);
	assert.equal(fp.versionOf(42), 42);
	assert.equal(fp.versionOf('42'), 42);
	assert.equal(fp.versionOf(' 7 '), 7);
	assert.equal(fp.versionOf('2026-03-01T10:00:00Z'), '2026-03-01T10:00:00Z');
	assert.equal(fp.versionOf(new Date('2026-03-01T10:00:00Z')), '2026-03-01T10:00:00.000Z');
	assert.equal(fp.versionOf({ toISO: () => '2026-03-01T10:00:00.000+01:00' }), '2026-03-01T10:00:00.000+01:00');
	assert.throws(() => fp.versionOf(-1), fp.InputError);
	assert.throws(() => fp.versionOf(1.5), fp.InputError);
	assert.throws(() => fp.versionOf('9007199254740993'), /above 2\^53/);
	assert.throws(() => fp.versionOf({}), fp.InputError);
});

test('decide: every outcome has one output, in_progress is try later (the Guard\'s error)', () => {
	const answer = (outcome) => ({ outcome, record: record('in_progress') });
	assert.deepEqual(routing.decide(answer('acquired')), { output: routing.NEW });
	assert.deepEqual(routing.decide(answer('replay')), { output: routing.ALREADY_DONE });
	assert.deepEqual(routing.decide(answer('in_progress')), { tryLater: 'in_progress' });
	assert.deepEqual(routing.decide(answer('fingerprint_mismatch')), {
		output: routing.NEEDS_ATTENTION,
		reason: 'fingerprint_mismatch',
	});
	assert.deepEqual(routing.decide(answer('needs_reconciliation')), {
		output: routing.NEEDS_ATTENTION,
		reason: 'needs_reconciliation',
	});
});

test('newLeaseToken: lt_ and 32 base64url characters, a new one every time', () => {
	const tokens = new Set(Array.from({ length: 1000 }, () => newLeaseToken()));
	assert.equal(tokens.size, 1000);
	for (const token of tokens) assert.match(token, /^lt_[A-Za-z0-9_-]{32}$/);
});

test('claimAnswerOf reads "resumed" only when it is true', () => {
	const answer = (resumed) => contract.claimAnswerOf({ outcome: 'acquired', lease_token: 'lt_1', attempt: 1, resumed, record: record('in_progress') });
	assert.equal(answer(true).resumed, true);
	assert.equal('resumed' in answer('true'), false);
	assert.equal('resumed' in answer(undefined), false);
});

test('guardInfo carries the lease token on New and the stored result on Already Done', () => {
	const fresh = routing.guardInfo('s', 'k', { outcome: 'acquired', lease_token: 'lt_x', attempt: 1, record: record('in_progress') }, routing.NEW);
	assert.equal(fresh.route, 'new');
	assert.equal(fresh.lease_token, 'lt_x');
	assert.equal(fresh.reason, null);
	const result = { resource_id: 'INV-1', status_code: 201, body: { id: 'INV-1' } };
	const done = routing.guardInfo('s', 'k', { outcome: 'replay', record: record('succeeded', { result }) }, routing.ALREADY_DONE);
	assert.equal(done.route, 'already_done');
	assert.deepEqual(done.result, result);
	assert.equal('lease_token' in done, false);
	const json = routing.withInfo({ body: { a: 1 } }, 'idem', done);
	assert.deepEqual(json.body, { a: 1 });
	assert.equal(json.idem.route, 'already_done');
});

test('batchEntryOf: a claim result, or the error that refused this item alone', () => {
	assert.equal(batchEntryOf({ outcome: 'replay', record: record('succeeded') }).answer.outcome, 'replay');
	assert.deepEqual(batchEntryOf({ error: { code: 'invalid_request', message: 'version kind', details: {} } }).refused.code, 'invalid_request');
	assert.equal(batchEntryOf(42).refused.code, 'invalid_response');
});
