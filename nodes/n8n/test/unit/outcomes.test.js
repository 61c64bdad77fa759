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
