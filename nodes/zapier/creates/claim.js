'use strict';
/**
 * Create "Claim Operation Key": POST /v1/claim before the side effect.
 *
 * Returns `route` "new" (`outcome` "acquired", `is_new` true, with the `lease_token` the
 * Complete step needs) or "already_done" (`outcome` "replay", `is_new` false, with the first
 * run's stored result as `result_*`). A Filter "Is New (Boolean) is true" or Paths on Route
 * let only a new claim reach the side effect. The two other endings of docs/outcomes.md fail
 * the step (lib/transport.js): needs attention halts, try later throttles (Zapier runs the
 * step again), so the Zap never goes on without a claim.
 *
 * While another run holds the key, the key store waits up to "Wait for a Running Attempt"
 * seconds (`wait_seconds`) and answers with what that run did. The claim proposes a lease
 * token made for this step run; a claim that got no answer is sent once more with it, and
 * resumes what the lost one acquired.
 */
const crypto = require('node:crypto');
const { call } = require('../lib/transport');
const fields = require('../lib/fields');

// Zapier gives an action step about 30 seconds in all: a claim that waits 20 s leaves time
// for the request itself, one more try of a claim whose answer was lost, and Zapier's work.
const MAX_WAIT_SECONDS = 20;
const LEASE_TOKEN_BYTES = 24; // 32 base64url characters, 192 random bits (docs/api.md: 128+)

/** The wait the step asks for: whole seconds, 0 to MAX_WAIT_SECONDS (empty: no wait). */
function waitSeconds(value) {
  const seconds = Math.floor(Number(value));
  return Number.isFinite(seconds) ? Math.min(Math.max(seconds, 0), MAX_WAIT_SECONDS) : 0;
}

const perform = async (z, bundle) => {
  const input = bundle.inputData;
  const payload = input.payload && Object.keys(input.payload).length ? input.payload : undefined;
  const wait = waitSeconds(input.wait_seconds);
  const body = await call(z, bundle, {
    method: 'POST',
    path: '/v1/claim',
    body: {
      scope: input.scope,
      key: input.key,
      payload,
      ttl_seconds: fields.optionalInt(input.ttl_seconds),
      lease_seconds: fields.optionalInt(input.lease_seconds),
      on_stale: input.on_stale || undefined,
      lease_token: `lt_${crypto.randomBytes(LEASE_TOKEN_BYTES).toString('base64url')}`,
      wait_seconds: wait > 0 ? wait : undefined,
    },
    onceMore: true,
  });
  const isNew = body.outcome === 'acquired';
  return {
    ...fields.recordOutput(body.record),
    outcome: body.outcome,
    route: isNew ? 'new' : 'already_done',
    is_new: isNew,
    resumed: body.resumed === true,
    lease_token: body.lease_token ?? null,
  };
};

module.exports = {
  key: 'claim',
  noun: 'Operation Key',
  display: {
    label: 'Claim Operation Key',
    description: 'Claims a stable key before a side effect, so that a repeated trigger item '
      + 'gets the first result back instead of doing the work twice.',
  },
  operation: {
    perform,
    inputFields: [
      fields.scope,
      fields.key,
      {
        key: 'payload',
        label: 'Payload',
        dict: true,
        required: false,
        helpText: 'The values that say what this operation does (amount, customer, ...). A '
          + 'repeat with the same key and the same values is a replay; the same key with '
          + 'other values is refused and the run halted for review. Leave empty to compare '
          + 'keys only.',
      },
      {
        key: 'wait_seconds',
        label: 'Wait for a Running Attempt (Seconds)',
        type: 'integer',
        required: false,
        default: '10',
        helpText: 'If another run is still working on this key, the key store waits up to this '
          + `many seconds (0-${MAX_WAIT_SECONDS}: Zapier gives a step about 30 s) for its result. `
          + 'Still running then: the step is retried later (throttled), never continued.',
      },
      {
        key: 'lease_seconds',
        label: 'Lease (Seconds)',
        type: 'integer',
        required: false,
        helpText: 'How long this run may work before its attempt counts as stale (1-86400, '
          + 'default 300). Longer than the slowest side effect step.',
      },
      {
        key: 'on_stale',
        label: 'When the Lease Runs Out',
        required: false,
        default: 'reconcile',
        choices: {
          reconcile: 'Send to review (safe: the effect may have happened)',
          retry: 'Let the next run try again (only for effects that are safe to repeat)',
        },
      },
      {
        key: 'ttl_seconds',
        label: 'Remember For (Seconds)',
        type: 'integer',
        required: false,
        helpText: 'How long the key is remembered after the first claim (default 259200 = '
          + '72 hours). Longer than the longest time in which a repeat can arrive.',
      },
    ],
    sample: { ...fields.sampleRecord, outcome: 'replay', route: 'already_done', is_new: false,
      resumed: false, lease_token: null },
    outputFields: [
      { key: 'outcome', label: 'Outcome (acquired or replay)' },
      { key: 'route', label: 'Route (new or already_done)' },
      { key: 'is_new', label: 'Is New', type: 'boolean' },
      { key: 'lease_token', label: 'Lease Token' },
      { key: 'state', label: 'State' },
      { key: 'attempt', label: 'Attempt', type: 'integer' },
      { key: 'result_resource_id', label: 'Stored Result: Resource ID' },
      { key: 'result_status_code', label: 'Stored Result: Status Code', type: 'integer' },
    ],
  },
};
