'use strict';
/**
 * Create "Complete Operation": POST /v1/complete after the side effect, with its result.
 *
 * The result (resource ID, status code, body) is what a later replay of the same key returns.
 * Completing again with the same token, state and result is harmless (autoreplay may do it).
 * Errors: lease_lost (another attempt took over) and already_completed are z.errors.Error.
 */
const { call } = require('../lib/transport');
const fields = require('../lib/fields');

const perform = async (z, bundle) => {
  const input = bundle.inputData;
  const result = {
    resource_id: input.resource_id || undefined,
    status_code: fields.optionalInt(input.status_code),
    body: input.result_body && Object.keys(input.result_body).length ? input.result_body : undefined,
  };
  const body = await call(z, bundle, {
    method: 'POST',
    path: '/v1/complete',
    body: {
      scope: input.scope,
      key: input.key,
      lease_token: input.lease_token,
      state: input.state || 'succeeded',
      result,
    },
  });
  return fields.recordOutput(body.record);
};

module.exports = {
  key: 'complete',
  noun: 'Operation',
  display: {
    label: 'Complete Operation',
    description: 'Records the result of a claimed operation, so that repeats get this result '
      + 'back instead of doing the work again.',
  },
  operation: {
    perform,
    inputFields: [
      fields.scope,
      fields.key,
      fields.leaseToken,
      {
        key: 'state',
        label: 'Outcome',
        required: true,
        default: 'succeeded',
        choices: {
          succeeded: 'Succeeded',
          failed: 'Failed for good (repeats get this failure back)',
        },
      },
      {
        key: 'resource_id',
        label: 'Resource ID',
        required: false,
        helpText: 'What the side effect created, such as the invoice ID.',
      },
      { key: 'status_code', label: 'Status Code', type: 'integer', required: false },
      {
        key: 'result_body',
        label: 'Result Values',
        dict: true,
        required: false,
        helpText: 'Values later steps need on a replay (a URL, a number); at most 256 KiB.',
      },
    ],
    sample: fields.sampleRecord,
    outputFields: [
      { key: 'state', label: 'State' },
      { key: 'result_resource_id', label: 'Stored Result: Resource ID' },
    ],
  },
};
