'use strict';
// The Guard's mapping of every key store answer is the one docs/outcomes.md gives n8n: the
// doc's two tables are read (test-support/outcomes-doc.js) and each answer is run through the
// Guard's own code (routing.decide, and failure.failureOf for what ends as the node's error).
const test = require('node:test');
const assert = require('node:assert/strict');
const { NodeApiError } = require('n8n-workflow');
const { load } = require('../support/n8n-context');
const { readOutcomesDoc } = require('../../../test-support/outcomes-doc');

const contract = load('nodes/shared/contract.js');
const routing = load('nodes/shared/routing.js');
const { failureOf } = load('nodes/shared/failure.js');
const { tagged } = load('nodes/shared/transport.js');
const { IdempotencyGuard } = load('nodes/IdempotencyGuard/IdempotencyGuard.node.js');

const doc = readOutcomesDoc();
const COLUMN = 'n8n Guard';
const { outputNames } = new IdempotencyGuard().description;
const CLAIM_OUTCOMES = ['acquired', 'replay', 'in_progress', 'needs_reconciliation', 'fingerprint_mismatch'];

/** Where the Guard sends an answer: an output's name, or `error` (the node's error path). */
function guardEnding(code) {
	if (CLAIM_OUTCOMES.includes(code)) {
		const answer = contract.claimAnswerOf({ outcome: code, lease_token: 'lt_x', record: { scope: 's', key: 'k', state: 'in_progress' } });
		const decision = routing.decide(answer);
		if (!('tryLater' in decision)) return outputNames[decision.output];
		code = decision.tryLater; // raised by guard.ts as an error tagged with this code
	}
	const error = tagged(new NodeApiError({ name: 'Guard', type: 'test', typeVersion: 1 }, { message: code }), code);
	return failureOf(error).retry ? 'error' : `error that a resend cannot cure (${code})`;
}

test('every answer in docs/outcomes.md ends where the doc says, in the Guard', () => {
	assert.ok(doc.answers.length >= 8, `the doc's table lists ${doc.answers.length} answers`);
	for (const code of doc.answers) {
		const [idiom] = doc.idiomOf(doc.endingOf(code), COLUMN);
		assert.equal(guardEnding(code), idiom, `${code} (${doc.endingOf(code)})`);
	}
});

test('every claim outcome of docs/api.md has a row in docs/outcomes.md', () => {
	for (const outcome of CLAIM_OUTCOMES) assert.ok(doc.answers.includes(outcome), outcome);
	// the Guard's three outputs are the doc's first three endings, in order
	assert.deepEqual(
		['New', 'Already done', 'Needs attention'].map((ending) => doc.idiomOf(ending, COLUMN)[0]),
		outputNames,
	);
});

// Send Once's column of docs/outcomes.md "A send's answers": each answer of POST /v1/send is
// run through what the operation uses (contract.sendAnswerOf and sendRefused for an answer,
// transport.unexpected for an error of the key store, keystore.send for no answer at all).
const { readSendTable, codeSpans } = require('../../../test-support/outcomes-doc');
const { send } = load('nodes/shared/keystore.js');
const transport = load('nodes/shared/transport.js');

const SEND_STATUS = { sent: 201, accepted: 202, failed: 200, replay: 200, in_progress: 409, needs_reconciliation: 409, fingerprint_mismatch: 422, unavailable: 503, rate_limited: 429 };
const node = { name: 'Send Once', type: 'test', typeVersion: 1 };

/** The code spans Send Once's column must start with, for `code` in a row ending `ending`. */
async function sendEnding(code, ending) {
	if (code === undefined) {
		const ctx = { getNode: () => node, helpers: { httpRequestWithAuthentication: async () => { throw new Error('ECONNREFUSED'); } } };
		const error = await send({ ctx, url: 'http://127.0.0.1:9' }, { scope: 's', key: 'k', connection: 'c', request: {}, wait_seconds: 0 }, 0).then(() => null, (e) => e);
		return ['error', error.context.keystoreCode];
	}
	const record = { scope: 's', key: 'k', state: ending === 'Refused' ? 'failed' : 'succeeded', result: null };
	const answer = contract.sendAnswerOf(SEND_STATUS[code], { outcome: code, record });
	if (answer) return contract.sendRefused(answer) ? ['error', 'send_failed'] : ['outcome', code];
	const error = transport.unexpected({ getNode: () => node }, { status: SEND_STATUS[code], body: { error: { code, message: code, details: {} } }, headers: {} });
	return ['error', error.context.keystoreCode];
}

test('Send Once ends every answer of a send as docs/outcomes.md "A send\'s answers" says', async () => {
	const rows = readSendTable();
	assert.ok(rows.length >= 9, `the send table lists ${rows.length} rows`);
	for (const row of rows) {
		const cell = row.cells.get('n8n *Send Once*');
		assert.ok(cell, 'the table has the n8n column');
		for (const code of row.codes.length ? row.codes : [undefined]) {
			const [kind, value] = await sendEnding(code, row.ending);
			const spans = codeSpans(cell);
			if (kind === 'outcome') {
				assert.match(cell, /^the main output: `outcome` /, `${code}: ${cell}`);
				assert.equal(spans[1], value, `${code}: ${cell}`);
			} else {
				assert.equal(spans[0], 'error', `${code ?? 'no answer'}: ${cell}`);
				assert.ok(spans.includes(value), `${code ?? 'no answer'} -> ${value}: ${cell}`);
			}
		}
	}
});
