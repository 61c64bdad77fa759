'use strict';
/**
 * Create "Claim Operation Key": POST /v1/claim before the side effect.
 *
 * Returns `outcome` "acquired" (`is_new` true, with the `lease_token` the Complete step needs)
 * or "replay" (`is_new` false, with the first run's stored result as `result_*`). A Filter
 * "Is New (Boolean) is true" or Paths on Outcome let only a new claim reach the side effect.
 * Errors: see lib/transport.js (in progress: retried later; mismatch: halted).
 */
const { call } = require('../lib/transport');
const fields = require('../lib/fields');

const perform = async (z, bundle) => {
  const input = bundle.inputData;
  const payload = input.payload && Object.keys(input.payload).length ? input.payload : undefined;
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
    },
  });
  return {
    ...fields.recordOutput(body.record),
    outcome: body.outcome,
    is_new: body.outcome === 'acquired',
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
    sample: { ...fields.sampleRecord, outcome: 'replay', is_new: false, lease_token: null },
    outputFields: [
      { key: 'outcome', label: 'Outcome (acquired or replay)' },
      { key: 'is_new', label: 'Is New', type: 'boolean' },
      { key: 'lease_token', label: 'Lease Token' },
      { key: 'state', label: 'State' },
      { key: 'attempt', label: 'Attempt', type: 'integer' },
      { key: 'result_resource_id', label: 'Stored Result: Resource ID' },
      { key: 'result_status_code', label: 'Stored Result: Status Code', type: 'integer' },
    ],
  },
};
