'use strict';
/**
 * Search "Find Operation Key": GET /v1/keys, optionally waiting for a running attempt.
 *
 * Returns [record] or [] when the key is unknown or expired. With "Wait" set, a record that
 * is in progress is watched until it changes or the time is up, so a step that follows a
 * timeout can pick up the first attempt's result.
 */
const { call } = require('../lib/transport');
const fields = require('../lib/fields');

// Zapier gives an action step 30 seconds in all; the key store allows waits up to 30.
// 25 leaves room for the request itself and the rest of the step.
const MAX_WAIT_SECONDS = 25;

const perform = async (z, bundle) => {
  const input = bundle.inputData;
  const wait = Math.min(Number(input.wait_seconds) || 0, MAX_WAIT_SECONDS);
  const params = { scope: input.scope, key: input.key };
  if (wait > 0) params.wait = String(Math.floor(wait));
  const body = await call(z, bundle, { method: 'GET', path: '/v1/keys', params, absentOk: true });
  return body ? [fields.recordOutput(body.record)] : [];
};

module.exports = {
  key: 'find_operation',
  noun: 'Operation Key',
  display: {
    label: 'Find Operation Key',
    description: 'Finds the record of an operation key, optionally waiting for a running '
      + 'attempt to finish, and gives its state and stored result.',
  },
  operation: {
    perform,
    inputFields: [
      fields.scope,
      fields.key,
      {
        key: 'wait_seconds',
        label: 'Wait (Seconds)',
        type: 'integer',
        required: false,
        default: '0',
        helpText: `If another run is still working on the key, wait up to this many seconds `
          + `(at most ${MAX_WAIT_SECONDS}) for it to finish.`,
      },
    ],
    sample: fields.sampleRecord,
  },
};
