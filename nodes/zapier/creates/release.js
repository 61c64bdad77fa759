'use strict';
/**
 * Create "Release Operation": POST /v1/release when the side effect did NOT happen and may
 * be tried again: the attempt is given back and the next claim of the key acquires it.
 * Releasing again with the same token is harmless. A finished record is not released
 * (already_completed), and a replaced token is refused (lease_lost).
 */
const { call } = require('../lib/transport');
const fields = require('../lib/fields');

const perform = async (z, bundle) => {
  const input = bundle.inputData;
  const body = await call(z, bundle, {
    method: 'POST',
    path: '/v1/release',
    body: {
      scope: input.scope,
      key: input.key,
      lease_token: input.lease_token,
      reason: input.reason || undefined,
    },
  });
  return fields.recordOutput(body.record);
};

module.exports = {
  key: 'release',
  noun: 'Operation',
  display: {
    label: 'Release Operation',
    description: 'Gives a claimed operation back when its side effect did not happen, so the '
      + 'next delivery of the same item can try again.',
  },
  operation: {
    perform,
    inputFields: [
      fields.scope,
      fields.key,
      fields.leaseToken,
      {
        key: 'reason',
        label: 'Reason',
        required: false,
        helpText: 'Why it was given back; kept in the attempt history.',
      },
    ],
    sample: { ...fields.sampleRecord, state: 'released', result_resource_id: null,
      result_status_code: null, result_body: null },
  },
};
