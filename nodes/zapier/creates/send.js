'use strict';
/**
 * Create "Send Once": POST /v1/send. The key store makes one request to a connection's API
 * (its base URL, credentials and idempotency header are set up by an operator in the key
 * store, never in the Zap) at most once per scope and key, and every repeat of the step gets
 * the first answer back. docs/outcomes.md, "A send's answers", is the mapping:
 *
 *   sent (201)              the step succeeds: `outcome` sent, the API's status, resource ID
 *                           and body
 *   replay (200) of a       the step succeeds: `outcome` replay, `replayed` true, the first
 *   success                 answer (nothing was sent this time)
 *   failed (200), replay    HaltedError: the API refused for good (a 4xx it does not retry);
 *   of a refusal            every repeat gets the same refusal, so a person fixes the data
 *   accepted (202)          ThrottledError: not settled within the wait; Zapier runs the step
 *                           again later, which answers replay once the send settled
 *   in_progress, mismatch,  lib/transport.js, as for a claim (throttle, halt, halt)
 *   needs_reconciliation
 *
 * A request that got no answer is not sent again at once: the transport throttles the step
 * and Zapier's rerun asks again with the same key, which never sends twice.
 */
const { call } = require('../lib/transport');
const fields = require('../lib/fields');

// As the Claim step: Zapier gives a step about 30 seconds in all.
const MAX_WAIT_SECONDS = 20;
// How long Zapier waits before it runs a step again whose send was accepted but not settled.
const ACCEPTED_DELAY_SECONDS = 15;
const METHODS = ['POST', 'PUT', 'PATCH', 'DELETE'];
const ANSWER_TEXT = 500; // characters of the API's answer in a halt's message

function waitSeconds(value) {
  const seconds = Math.floor(Number(value));
  return Number.isFinite(seconds) ? Math.min(Math.max(seconds, 0), MAX_WAIT_SECONDS) : 10;
}

function nonEmpty(dict) {
  return dict && typeof dict === 'object' && Object.keys(dict).length ? dict : undefined;
}

/** The request body: "Body (JSON)" when given (parsed here), else "Body Fields", else none. */
function jsonBody(z, input) {
  const text = typeof input.body_json === 'string' ? input.body_json.trim() : '';
  if (!text) return nonEmpty(input.body);
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new z.errors.Error(`Body (JSON) is not valid JSON: ${error.message}`, 'invalid_request', 400);
  }
}

function requestOf(z, input) {
  const method = String(input.method || 'POST').toUpperCase();
  if (!METHODS.includes(method)) {
    throw new z.errors.Error(`Method is one of ${METHODS.join(', ')}`, 'invalid_request', 400);
  }
  const request = { method, path: input.path, headers: nonEmpty(input.headers) };
  const json = jsonBody(z, input);
  if (json !== undefined) request.json = json;
  return request;
}

function shown(value) {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text && text.length > ANSWER_TEXT ? `${text.slice(0, ANSWER_TEXT)}...` : text;
}

/** The step's output for a settled send (sent, or a replay of a success). */
function output(body) {
  const result = body.result || (body.record && body.record.result) || {};
  return {
    ...fields.recordOutput(body.record),
    outcome: body.outcome,
    replayed: body.outcome === 'replay',
    status_code: result.status_code ?? null,
    resource_id: result.resource_id ?? null,
    body: result.body ?? null,
  };
}

const perform = async (z, bundle) => {
  const input = bundle.inputData;
  const wait = waitSeconds(input.wait_seconds);
  const body = await call(z, bundle, {
    method: 'POST',
    path: '/v1/send',
    body: {
      scope: input.scope,
      key: input.key,
      connection: input.connection,
      request: requestOf(z, input),
      payload: nonEmpty(input.payload),
      resource_id_pointer: input.resource_id_pointer || undefined,
      wait_seconds: wait,
    },
  });
  const where = `${input.scope} / ${input.key}`;
  if (body.outcome === 'accepted') {
    throw new z.errors.ThrottledError(`The key store queued the request for ${where} and the `
      + `API has not answered for good yet; Zapier runs this step again, which sends nothing `
      + 'twice and gets the answer.', ACCEPTED_DELAY_SECONDS);
  }
  const out = output(body);
  if (body.outcome === 'failed' || (body.outcome === 'replay' && out.state === 'failed')) {
    throw new z.errors.HaltedError(`The API refused the request for ${where} for good (HTTP `
      + `${out.status_code}): ${shown(out.body)}. Repeats of this step get the same answer: `
      + 'fix the data, and use a new key for a corrected request.');
  }
  return out;
};

module.exports = {
  key: 'send_once',
  noun: 'Request',
  display: {
    label: 'Send Once',
    description: 'Has the key store make one request to an API (a connection set up in the '
      + 'key store) at most once per key, so that a repeated trigger item gets the first '
      + 'answer back instead of creating the thing twice.',
  },
  operation: {
    perform,
    inputFields: [
      fields.scope,
      fields.key,
      {
        key: 'connection',
        label: 'Connection',
        required: true,
        helpText: 'The name of a connection in the key store (an operator creates it with '
          + '`keystore connection create`: the API\'s base URL and credentials live there, '
          + 'never in the Zap).',
      },
      {
        key: 'method', label: 'Method', required: true, default: 'POST',
        choices: Object.fromEntries(METHODS.map((m) => [m, m])),
      },
      {
        key: 'path',
        label: 'Path',
        required: true,
        helpText: 'Relative to the connection\'s base URL, beginning with `/`, such as '
          + '`/invoices`. No scheme, no host, no `..`.',
      },
      {
        key: 'body', label: 'Body Fields', dict: true, required: false,
        helpText: 'The JSON body as fields (every value a string). For numbers or nested '
          + 'values use Body (JSON).',
      },
      {
        key: 'body_json', label: 'Body (JSON)', type: 'text', required: false,
        helpText: 'The JSON body as text; when given, Body Fields are not used.',
      },
      { key: 'headers', label: 'Headers', dict: true, required: false,
        helpText: 'Headers of this request besides the connection\'s own (no credentials here).' },
      {
        key: 'payload', label: 'Payload', dict: true, required: false,
        helpText: 'The values that say what this operation is (amount, customer, ...). A '
          + 'repeat with the same key and other values is halted for review. Empty: the '
          + 'request itself (method, path, body) is compared.',
      },
      {
        key: 'resource_id_pointer', label: 'Resource ID Pointer', required: false,
        helpText: 'Where the API\'s answer holds the created thing\'s ID, as a JSON pointer '
          + 'such as `/id`.',
      },
      {
        key: 'wait_seconds', label: 'Wait for the Answer (Seconds)', type: 'integer',
        required: false, default: '10',
        helpText: `How long the key store waits for the API's answer (0-${MAX_WAIT_SECONDS}). `
          + 'Not settled by then: the step is run again later (throttled), never continued.',
      },
    ],
    sample: { ...fields.sampleRecord, outcome: 'sent', replayed: false, status_code: 201,
      resource_id: 'INV-42', body: { id: 'INV-42' } },
    outputFields: [
      { key: 'outcome', label: 'Outcome (sent or replay)' },
      { key: 'replayed', label: 'Replayed', type: 'boolean' },
      { key: 'status_code', label: 'Status Code', type: 'integer' },
      { key: 'resource_id', label: 'Resource ID' },
      { key: 'state', label: 'State' },
    ],
  },
};
