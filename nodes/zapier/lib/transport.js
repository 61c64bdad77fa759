'use strict';
/**
 * The one way this app talks to the key store: `call()` sends a request with the
 * connection's token and returns the parsed JSON body of a 2xx answer, or throws the Zapier
 * error that tells Zapier what to do next. The key store's error `code` decides, never the
 * bare HTTP status:
 *
 *   in_progress (409)              ThrottledError(Retry-After): the first attempt still holds
 *                                  the lease; Zapier runs this step again after the delay
 *   rate_limited (429),            ThrottledError: the key store asked us to come back later;
 *   unavailable (503)              nothing was written
 *   fingerprint_mismatch (422)     HaltedError: a person must look (review queue); retrying
 *   needs_reconciliation (409)     cannot help, and a halt never turns the Zap off
 *   unauthorized (401)             ExpiredAuthError: the token was revoked or replaced; Zapier
 *                                  holds the runs and asks the user to reconnect
 *   anything else                  z.errors.Error(message, code, status)
 */

// The key store sends Retry-After: 1 on 503 (database down). Zapier re-runs a throttled step
// as often as told, so a floor keeps an outage from becoming a retry storm.
const MIN_OUTAGE_DELAY_SECONDS = 30;

/** The base URL of the connection, without a trailing slash. */
function baseUrl(bundle) {
  return String(bundle.authData.url || '').trim().replace(/\/+$/, '');
}

function retryAfter(response, floor = 1) {
  const seconds = parseInt(response.getHeader('retry-after') || '', 10);
  return Math.max(Number.isNaN(seconds) ? floor : seconds, floor);
}

function describe(body) {
  const record = body.record || {};
  return record.scope !== undefined ? ` for ${record.scope} / ${record.key}` : '';
}

/** The Zapier error for a non-2xx answer of the key store (see the table above). */
function toZapierError(z, response) {
  const body = (response.data && typeof response.data === 'object') ? response.data : {};
  const error = body.error || {};
  const code = error.code || `http_${response.status}`;
  const message = error.message || `the key store answered HTTP ${response.status}`;
  const where = describe(body);
  switch (code) {
    case 'in_progress':
      return new z.errors.ThrottledError(
        `Another run is still working on this operation${where}; trying again when its lease ends.`,
        retryAfter(response));
    case 'rate_limited':
      return new z.errors.ThrottledError(`The key store is rate limiting this token: ${message}`,
        retryAfter(response));
    case 'unavailable':
      return new z.errors.ThrottledError(`The key store is unavailable: ${message}`,
        retryAfter(response, MIN_OUTAGE_DELAY_SECONDS));
    case 'fingerprint_mismatch':
      return new z.errors.HaltedError(
        `This operation key was already used with a different payload${where}. Nothing was `
        + 'done and the first result is kept. A person must review it in the key store '
        + '(review queue); fix the key or the payload mapping if this is not a true duplicate.');
    case 'needs_reconciliation':
      return new z.errors.HaltedError(
        `An earlier attempt${where} stopped without saying whether it finished, so this run `
        + 'was halted instead of risking a second effect. Resolve it in the key store (review '
        + 'queue), then replay this Zap run.');
    case 'unauthorized':
      return new z.errors.ExpiredAuthError(
        'The key store refused the token (it was revoked or replaced). Reconnect the Idempotency '
        + 'Key Store account with a valid token.');
    default:
      return new z.errors.Error(`${message}${where} (${code})`, code, response.status);
  }
}

/**
 * Send one request to the key store.
 * @param {object} z  Zapier's z object
 * @param {object} bundle  the bundle (authData.url and authData.token are used)
 * @param {{method: string, path: string, body?: object, params?: object,
 *          absentOk?: boolean}} request  absentOk: answer null for an unknown or expired key
 * @returns {Promise<object|null>} the JSON body of a 2xx answer
 * @throws the Zapier error for any other answer (toZapierError)
 */
async function call(z, bundle, { method, path, body, params, absentOk = false }) {
  const response = await z.request({
    method,
    url: `${baseUrl(bundle)}${path}`,
    params,
    body,
    headers: { Authorization: `Bearer ${bundle.authData.token}`, Accept: 'application/json' },
    // Every non-2xx answer is mapped below, by the key store's error code, in one place.
    skipThrowForStatus: true,
    throwForThrottlingEarly: false,
  });
  if (response.status >= 200 && response.status < 300) return response.data;
  if (absentOk && response.status === 404) {
    const code = response.data && response.data.error && response.data.error.code;
    if (code === 'not_found' || code === 'expired') return null;
  }
  throw toZapierError(z, response);
}

module.exports = { call, toZapierError, baseUrl };
