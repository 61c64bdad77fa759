'use strict';
/**
 * The key store's HTTP API as the nodes use it: one request function and one error type.
 *
 * `call()` resolves to {status, body, retryAfter} for EVERY answer of the key store (the
 * guard routes on 409 and 422 answers) and rejects with KeystoreError only when no answer
 * came (network failure, timeout) or the answer is not the key store's JSON. `raise()` turns
 * an answer into a KeystoreError carrying docs/api.md's `code`, the HTTP status, the
 * Retry-After seconds and the record, for nodes that treat every non-2xx as an error.
 */

class KeystoreError extends Error {
  /**
   * @param {string} message  for a person; never contains the token or a payload
   * @param {{code: string, status?: number, retryAfter?: number, record?: object}} details
   */
  constructor(message, { code, status = null, retryAfter = null, record = null }) {
    super(message);
    this.name = 'KeystoreError';
    this.code = code;
    this.status = status;
    this.retryAfter = retryAfter;
    this.record = record;
  }
}

/**
 * One request to the key store.
 * @param {{url: string, token: string, timeoutMs: number}} server  from the config node
 * @param {string} method
 * @param {string} path  such as /v1/claim
 * @param {{body?: object, params?: object, extraMs?: number}} [options]  extraMs: added to
 *        the timeout for calls the server may hold (a lookup with `wait`)
 * @returns {Promise<{status: number, body: object, retryAfter: number|null}>}
 * @throws {KeystoreError} code `unreachable` (no answer in time) or `bad_response`
 */
async function call(server, method, path, { body, params, extraMs = 0 } = {}) {
  const url = new URL(`${server.url.replace(/\/+$/, '')}${path}`);
  for (const [name, value] of Object.entries(params || {})) url.searchParams.set(name, String(value));
  let response;
  try {
    response = await fetch(url, {
      method,
      headers: {
        Authorization: `Bearer ${server.token}`,
        Accept: 'application/json',
        ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(server.timeoutMs + extraMs),
    });
  } catch (error) {
    // fetch says only "fetch failed"; the cause has the network's reason (ECONNREFUSED...)
    const reason = error.name === 'TimeoutError' ? `no answer in ${(server.timeoutMs + extraMs) / 1000} s`
      : (error.cause && error.cause.code) || error.message;
    throw new KeystoreError(`the key store at ${url.origin} did not answer (${reason})`,
      { code: 'unreachable' });
  }
  const text = await response.text();
  let data;
  try {
    data = JSON.parse(text);
  } catch {
    data = null;
  }
  if (data === null || typeof data !== 'object') {
    throw new KeystoreError(`${url.origin} answered HTTP ${response.status} without the key `
      + 'store\'s JSON: is the URL right?', { code: 'bad_response', status: response.status });
  }
  const seconds = parseInt(response.headers.get('retry-after') || '', 10);
  return { status: response.status, body: data, retryAfter: Number.isNaN(seconds) ? null : seconds };
}

/** The KeystoreError for a non-2xx answer of call(). */
function raise({ status, body, retryAfter }) {
  const error = body.error || {};
  return new KeystoreError(error.message || `the key store answered HTTP ${status}`,
    { code: error.code || `http_${status}`, status, retryAfter, record: body.record || null });
}

module.exports = { call, raise, KeystoreError };
