'use strict';
/**
 * API-key authentication: the key store's URL and a client token.
 *
 * The test asks the key store who the token is: GET /v1/whoami answers 200 {tenant, role,
 * token} only for a token the key store accepts, so the connection is labelled with its tenant
 * and role, and each mistake fails with its own message: a URL ending in /v1 (the app adds /v1
 * itself; refused before any request), a refused token, a key store without /v1/whoami, an
 * answer from something that is not a key store, no answer at all.
 */
const { send, baseUrl } = require('./lib/transport');

/** Why this key store URL cannot work, or undefined if it may. */
function urlProblem(raw) {
  // the URL parser would drop a CR/LF or tab silently; refuse them instead
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(raw)) return 'The Key Store URL must not contain control characters (a line break?).';
  let url;
  try {
    url = new URL(raw);
  } catch {
    return `"${raw}" is not a URL: use the key store's address, such as https://keystore.example.com`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'The Key Store URL must start with https:// (or http://).';
  if (url.search || url.hash) return 'The Key Store URL must not have a query (?) or a fragment (#).';
  const path = url.pathname.replace(/\/+$/, '');
  if (/\/v1$/i.test(path)) {
    return `Remove /v1 from the Key Store URL: the app adds it itself. Use ${url.origin}${path.slice(0, -3)}`;
  }
  return undefined;
}

const test = async (z, bundle) => {
  const url = baseUrl(bundle);
  const problem = urlProblem(url);
  if (problem) throw new z.errors.Error(problem, 'invalid_url', 400);
  let response;
  try {
    response = await send(z, bundle, { method: 'GET', path: '/v1/whoami' });
  } catch (error) {
    // an action would retry this later; a connection test fails and says why, now
    throw new z.errors.Error(`The key store at ${url} did not answer (${error.reason}). Check the `
      + 'URL, and that Zapier can reach it (a public HTTPS address).', 'unreachable', 503);
  }
  const body = (response.data && typeof response.data === 'object') ? response.data : {};
  const code = body.error && body.error.code;
  if (response.status === 200 && typeof body.tenant === 'string' && typeof body.role === 'string') {
    return { url, tenant: body.tenant, role: body.role, token: body.token ?? null };
  }
  if (code === 'unauthorized') {
    throw new z.errors.Error('The key store refused this token. Copy a client token from '
      + '`keystore token create` (or from your key store operator) and try again.',
    'unauthorized', 401);
  }
  if (code === 'not_found') {
    throw new z.errors.Error(`A key store answered at ${url}, but has no /v1/whoami: use its root `
      + 'address (without /v1), and a key store of contract v1.1 or later.', 'not_found', 404);
  }
  if (code) throw new z.errors.Error(`The key store answered ${response.status} ${code}.`, code, response.status);
  throw new z.errors.Error(`No Idempotency Key Store answered at ${url} (HTTP ${response.status}). `
    + 'Check the URL (without /v1).', `http_${response.status}`, response.status);
};

module.exports = {
  type: 'custom',
  fields: [
    {
      key: 'url',
      label: 'Key Store URL',
      required: true,
      type: 'string',
      helpText: 'The address of your key store, such as `https://keystore.example.com` (without '
        + '`/v1`). It must be reachable from Zapier\'s servers (a public HTTPS address).',
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
  // the test's output: which tenant and role this token has, and where
  connectionLabel: '{{bundle.inputData.tenant}} ({{bundle.inputData.role}}) at {{bundle.inputData.url}}',
};
