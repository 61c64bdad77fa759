'use strict';
/**
 * The guard's mapping of every key store answer is the one docs/outcomes.md gives Node-RED:
 * the doc's two tables are read (test-support/outcomes-doc.js) and each answer is run through
 * the guard's own code: lib/guard.js route() for an answer, guard() for no answer at all.
 */
const { it } = require('node:test');
const assert = require('node:assert/strict');
const { readOutcomesDoc } = require('../../test-support/outcomes-doc');
const { guard, route } = require('../lib/guard');

const doc = readOutcomesDoc();
const COLUMN = 'Node-RED guard';
const OUTPUTS = ['new', 'already done', 'needs attention']; // the guard's outputLabels, in order
const STATUS = { acquired: 201, replay: 200, in_progress: 409, needs_reconciliation: 409,
  fingerprint_mismatch: 422, unavailable: 503, rate_limited: 429 };

/** The answer the key store gives for `code`, as lib/client.js call() resolves it. */
function answerFor(code) {
  const record = { scope: 's', key: 'k', state: 'in_progress', result: null };
  if (code === 'acquired') return { status: 201, body: { outcome: code, lease_token: 'lt_x', attempt: 1, record } };
  if (code === 'replay') return { status: 200, body: { outcome: code, record: { ...record, state: 'succeeded' } } };
  return { status: STATUS[code], retryAfter: 1, body: { error: { code, message: code, details: {} }, record } };
}

/** Where the guard sends it: an output's label, or `error` (to Catch nodes). */
async function guardEnding(code) {
  try {
    if (code === 'unreachable') {
      await guard({ url: 'http://127.0.0.1:9', token: 'ks_x', timeoutMs: 2000 }, { scope: 's', key: 'k' }, 0);
    } else {
      return OUTPUTS[route(answerFor(code), { scope: 's', key: 'k' }).output];
    }
  } catch (error) {
    assert.equal(error.code, code, 'the error carries the code for msg.keystore.outcome');
    return 'error';
  }
  return 'no error';
}

it('sends every answer in docs/outcomes.md where the doc says', async () => {
  assert.ok(doc.answers.length >= 8, `the doc's table lists ${doc.answers.length} answers`);
  for (const code of doc.answers) {
    const [idiom] = doc.idiomOf(doc.endingOf(code), COLUMN);
    assert.equal(await guardEnding(code), idiom, `${code} (${doc.endingOf(code)})`);
  }
});

it('has the doc\'s first three endings as its three outputs, in order', () => {
  assert.deepEqual(['New', 'Already done', 'Needs attention'].map((e) => doc.idiomOf(e, COLUMN)[0]), OUTPUTS);
  const html = require('node:fs').readFileSync(require.resolve('../nodes/keystore-guard.html'), 'utf8');
  assert.match(html, /outputLabels: \['new: do it', 'already done', 'needs attention'\]/);
});

// keystore send's column of docs/outcomes.md "A send's answers": each answer of POST /v1/send
// through lib/send.js route(), and sendOnce() for no answer at all.
const { readSendTable, codeSpans } = require('../../test-support/outcomes-doc');
const { route: sendRoute, sendOnce } = require('../lib/send');

const SEND_OUTPUTS = ['sent', 'failed', 'accepted', 'needs attention']; // keystore-send.html's outputLabels
const SEND_STATUS = { sent: 201, accepted: 202, failed: 200, replay: 200, ...STATUS };

async function sendEnding(code, ending) {
  const about = { scope: 's', key: 'k', connection: 'c' };
  try {
    if (code === undefined) {
      await sendOnce({ url: 'http://127.0.0.1:9', token: 'ks_x', timeoutMs: 2000 }, about, 0);
      return 'no error';
    }
    const record = { scope: 's', key: 'k', state: ending === 'Refused' ? 'failed' : 'succeeded', result: null };
    const body = ['sent', 'accepted', 'failed', 'replay'].includes(code) ? { outcome: code, record }
      : { error: { code, message: code, details: {} } };
    return SEND_OUTPUTS[sendRoute({ status: SEND_STATUS[code], body }, about).output];
  } catch (error) {
    assert.equal(error.code, code ?? 'unreachable', 'the error carries the code for msg.keystore.outcome');
    return 'error';
  }
}

it('sends every answer of a send where docs/outcomes.md "A send\'s answers" says', async () => {
  const rows = readSendTable();
  assert.ok(rows.length >= 9, `the send table lists ${rows.length} rows`);
  for (const row of rows) {
    const cell = row.cells.get('Node-RED *keystore send*');
    assert.ok(cell, 'the table has the Node-RED column');
    for (const code of row.codes.length ? row.codes : [undefined]) {
      assert.equal(await sendEnding(code, row.ending), codeSpans(cell)[0], `${code ?? 'no answer'}: ${cell}`);
    }
  }
  const html = require('node:fs').readFileSync(require.resolve('../nodes/keystore-send.html'), 'utf8');
  assert.match(html, /outputLabels: \['sent', 'failed', 'accepted', 'needs attention'\]/);
});
