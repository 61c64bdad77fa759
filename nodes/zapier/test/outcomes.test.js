'use strict';
/**
 * The Claim step's mapping of every key store answer is the one docs/outcomes.md gives
 * Zapier: the doc's two tables are read (test-support/outcomes-doc.js) and each answer is run
 * through the app: a real claim for `acquired` and `replay`, lib/transport.js toZapierError()
 * for the refused ones, and a claim against a closed port for no answer at all.
 */
const { it } = require('node:test');
const assert = require('node:assert/strict');
const zapier = require('zapier-platform-core');
const { readOutcomesDoc, readSendTable, codeSpans } = require('../../test-support/outcomes-doc');
const { toZapierError } = require('../lib/transport');
const { App, run, itemId, rejection } = require('./support');

const doc = readOutcomesDoc();
const COLUMN = 'Zapier Claim step';
const z = { errors: zapier.errors };
const STATUS = { in_progress: 409, needs_reconciliation: 409, fingerprint_mismatch: 422,
  unavailable: 503, rate_limited: 429 };

/** What the Claim step does with `code`: `route: ...` when it succeeds, else the error's name. */
async function stepEnding(code) {
  if (code === 'acquired' || code === 'replay') {
    const key = itemId('outcome');
    const first = await run(App.creates.claim, { scope: 'outcomes', key });
    if (code === 'acquired') return `route: ${first.route}`;
    await run(App.creates.complete, { scope: 'outcomes', key, lease_token: first.lease_token, state: 'succeeded' });
    return `route: ${(await run(App.creates.claim, { scope: 'outcomes', key })).route}`;
  }
  if (code === 'unreachable') {
    const error = await rejection(run(App.creates.claim, { scope: 'outcomes', key: 'k' },
      { url: 'http://127.0.0.1:9', token: 'ks_x' }));
    return error.name;
  }
  const response = { status: STATUS[code], data: { error: { code, message: code, details: {} } },
    getHeader: (name) => (name === 'retry-after' ? '7' : undefined) };
  return toZapierError(z, response).name;
}

it('ends every answer in docs/outcomes.md the way the doc says, in the Claim step', async () => {
  assert.ok(doc.answers.length >= 8, `the doc's table lists ${doc.answers.length} answers`);
  for (const code of doc.answers) {
    const [idiom] = doc.idiomOf(doc.endingOf(code), COLUMN);
    assert.equal(await stepEnding(code), idiom, `${code} (${doc.endingOf(code)})`);
  }
});

it("ends every refused answer of a send as docs/outcomes.md's \"A send's answers\" says", () => {
  const rows = readSendTable();
  const column = 'Zapier *Send Once*';
  const refused = rows.filter((row) => row.codes.some((code) => STATUS[code]));
  assert.ok(refused.length >= 4, `the send table lists ${refused.length} refused answers`);
  for (const row of refused) {
    const cell = row.cells.get(column);
    for (const code of row.codes) {
      const response = { status: STATUS[code], data: { error: { code, message: code, details: {} } },
        getHeader: () => undefined };
      assert.deepEqual(codeSpans(cell).slice(0, 1), [toZapierError(z, response).name], `${code}: ${cell}`);
    }
  }
  for (const row of rows.filter((r) => r.ending === 'Done')) {
    assert.match(row.cells.get(column), /^the step succeeds: `outcome` `(sent|replay)`/);
  }
});
