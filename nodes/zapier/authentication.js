'use strict';
/**
 * API-key authentication: the key store's URL and a client token.
 *
 * The test looks up a key that does not exist: a key store that accepts the token answers
 * 404 `not_found` (the token is checked before anything else), a wrong token 401. Anything
 * that is not a key store's answer fails the test as well.
 */
const { call, baseUrl } = require('./lib/transport');

const test = async (z, bundle) => {
  try {
    await call(z, bundle, {
      method: 'GET',
      path: '/v1/keys',
      params: { scope: 'zapier.connection-test', key: 'probe' },
      absentOk: true,
    });
  } catch (error) {
    if (error.name === 'ExpiredAuthError') {
      throw new z.errors.Error('The key store refused this token. Copy a client token from '
        + '`keystore token create` (or from your key store operator) and try again.',
      'unauthorized', 401);
    }
    throw error;
  }
  return { url: baseUrl(bundle) };
};

module.exports = {
  type: 'custom',
  fields: [
    {
      key: 'url',
      label: 'Key Store URL',
      required: true,
      type: 'string',
      helpText: 'The address of your key store, such as `https://keystore.example.com`. It '
        + 'must be reachable from Zapier\'s servers (a public HTTPS address).',
    },
    {
      key: 'token',
      label: 'Token',
      required: true,
      type: 'password',
      helpText: 'A client token of your tenant (it starts with `ks_`).',
    },
  ],
  test,
  connectionLabel: '{{url}}',
};
