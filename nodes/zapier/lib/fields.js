'use strict';
/**
 * Input fields shared by the operations, and the one shape every output takes.
 *
 * Every output carries the record's fields flat (`state`, `attempt`, ...) and its stored
 * result as `result_resource_id`, `result_status_code` and `result_body`, so a later step can
 * map the result of the FIRST run on a replay exactly as it maps a fresh one.
 */

const scope = {
  key: 'scope',
  label: 'Scope',
  required: true,
  helpText: 'The kind of operation, such as `create_invoice`: 1-128 characters of letters, '
    + 'digits and `_ . : -`. Use the same scope in every step about one operation.',
};

const key = {
  key: 'key',
  label: 'Operation Key',
  required: true,
  helpText: 'A stable id of the business event, such as the trigger item\'s ID or an order '
    + 'number. Never a random or time-based value: a repeat must produce the same key.',
};

const leaseToken = {
  key: 'lease_token',
  label: 'Lease Token',
  required: true,
  helpText: 'The **Lease Token** output of the "Claim Operation Key" step of this Zap.',
};

/** The Zapier output for a key-store record (docs/api.md's `record` object). */
function recordOutput(record) {
  const result = record.result || {};
  return {
    id: `${record.scope}:${record.key}`,
    scope: record.scope,
    key: record.key,
    state: record.state,
    attempt: record.attempt,
    fingerprint: record.fingerprint,
    first_seen_at: record.first_seen_at,
    last_seen_at: record.last_seen_at,
    expires_at: record.expires_at,
    lease_expires_at: record.lease_expires_at,
    duplicate_count: record.duplicate_count,
    result_resource_id: result.resource_id ?? null,
    result_status_code: result.status_code ?? null,
    result_body: result.body ?? null,
  };
}

/** Zapier sends integers as strings (or ''): a positive integer, or undefined when empty. */
function optionalInt(value) {
  if (value === undefined || value === null || value === '') return undefined;
  const number = Number(value);
  return Number.isInteger(number) ? number : value; // the key store refuses the rest with 400
}

const sampleRecord = {
  id: 'create_invoice:order-1001',
  scope: 'create_invoice',
  key: 'order-1001',
  state: 'succeeded',
  attempt: 1,
  fingerprint: 'sha256:3f0a1c9e7d2b4a6f8e1d0c3b5a7f9e2d4c6b8a0f1e3d5c7b9a2f4e6d8c0b1a3f',
  first_seen_at: '2027-01-15T08:00:00.000000Z',
  last_seen_at: '2027-01-15T08:00:00.000000Z',
  expires_at: '2027-01-18T08:00:00.000000Z',
  lease_expires_at: null,
  duplicate_count: 0,
  result_resource_id: 'INV-42',
  result_status_code: 201,
  result_body: { invoice_url: 'https://billing.example.com/invoices/INV-42' },
};

module.exports = { scope, key, leaseToken, recordOutput, optionalInt, sampleRecord };
