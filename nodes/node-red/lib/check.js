'use strict';
/**
 * The config node's connection check (its "Check connection" button): is there a key store at
 * this URL, and who is this token? GET /v1/whoami answers 200 {tenant, role, token} for a
 * token the key store accepts, and nothing else does, so each mistake gets its own message:
 * a URL ending in /v1 (the nodes add /v1 themselves; refused before any request), a refused
 * token, something else answering at the URL, no answer at all.
 */
const { call } = require('./client');

/** Why this key store URL cannot work, or undefined if it may. */
function urlProblem(raw) {
  // the URL parser would drop a CR/LF or tab silently; refuse them instead
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(raw)) return 'the URL must not contain control characters (a line break?)';
  let url;
  try {
    url = new URL(raw);
  } catch {
    return `"${raw}" is not a URL: use the key store's address, such as http://127.0.0.1:8080`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'the URL must start with http:// or https://';
  if (url.search || url.hash) return 'the URL must not have a query (?) or a fragment (#)';
  const path = url.pathname.replace(/\/+$/, '');
  if (/\/v1$/i.test(path)) {
    return `remove /v1 from the URL: the nodes add it themselves. Use ${url.origin}${path.slice(0, -3)}`;
  }
  return undefined;
}

/**
 * @param {{url: string, token: string, timeoutMs: number}} server
 * @returns {Promise<{ok: boolean, message: string, tenant?: string, role?: string, token?: string}>}
 *          never rejects: every outcome is a message for the editor (never with the token)
 */
async function checkConnection(server) {
  const url = String(server.url || '').trim().replace(/\/+$/, '');
  const problem = urlProblem(url);
  if (problem) return { ok: false, message: problem };
  let answer;
  try {
    answer = await call({ ...server, url }, 'GET', '/v1/whoami');
  } catch (error) {
    // unreachable (no answer) or bad_response (not the key store's JSON)
    const message = error.code === 'bad_response'
      ? `no Idempotency Key Store answered at ${url} (HTTP ${error.status}): check the URL (without /v1)`
      : error.message;
    return { ok: false, message };
  }
  const { status, body } = answer;
  if (status === 200 && typeof body.tenant === 'string' && typeof body.role === 'string') {
    return { ok: true, tenant: body.tenant, role: body.role, token: body.token,
      message: `connected: tenant "${body.tenant}", ${body.role} token "${body.token}"` };
  }
  const code = body.error && body.error.code;
  if (code === 'unauthorized') {
    return { ok: false, message: 'the key store refused this token (401): create one with '
      + '`keystore token create --tenant NAME --role client`' };
  }
  if (code === 'not_found') {
    return { ok: false, message: `a key store answered at ${url} but has no /v1/whoami: use its `
      + 'root address (without /v1), and a key store of contract v1.1 or later' };
  }
  if (code) return { ok: false, message: `the key store answered ${status} ${code}` };
  return { ok: false, message: `no Idempotency Key Store answered at ${url} (HTTP ${status}): `
    + 'check the URL (without /v1)' };
}

module.exports = { checkConnection, urlProblem };
