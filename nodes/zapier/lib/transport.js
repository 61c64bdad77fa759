'use strict';
/**
 * The one way this app talks to the key store: `call()` sends a request with the
 * connection's token and returns the parsed JSON body of a 2xx answer, or throws the Zapier
 * error that tells Zapier what to do next. The key store's error `code` decides, never the
 * bare HTTP status:
 *
 *   in_progress (409)              ThrottledError(Retry-After): the first attempt still holds
 *                                  the lease (after the claim's wait); Zapier runs this step
 *                                  again after the delay (docs/outcomes.md: try later)
 *   rate_limited (429),            ThrottledError: the key store asked us to come back later;
 *   unavailable (503)              nothing was written
 *   fingerprint_mismatch (422)     HaltedError: a person must look (review queue); retrying
 *   needs_reconciliation (409)     cannot help, and a halt never turns the Zap off (needs
 *                                  attention)
 *   unauthorized (401)             ExpiredAuthError: the token was revoked or replaced; Zapier
 *                                  holds the runs and asks the user to reconnect
 *   no answer at all (refused,     ThrottledError(30 s): the key store is down; Zapier runs the
 *   reset, DNS), or 502/503/504    step again later, instead of an error that only Autoreplay
 *   without the key store's JSON   (if it is on) would retry. Never a success: nothing was
 *   (a proxy whose key store is    claimed, so the Zap must not go on to the side effect
 *   down)
 *   anything else                  z.errors.Error(message, code, status)
 */

// The key store sends Retry-After: 1 on 503 (database down). Zapier re-runs a throttled step
// as often as told, so a floor keeps an outage from becoming a retry storm.
const MIN_OUTAGE_DELAY_SECONDS = 30;

// What a proxy in front of a stopped key store answers (no key store JSON in the body).
const GATEWAY_STATUSES = new Set([502, 503, 504]);

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
      if (!error.code && GATEWAY_STATUSES.has(response.status)) {
        return new z.errors.ThrottledError(`The key store's address answered HTTP ${response.status} `
          + 'without the key store behind it; nothing was claimed or changed. Zapier runs this '
          + 'step again later.', retryAfter(response, MIN_OUTAGE_DELAY_SECONDS));
      }
      return new z.errors.Error(`${message}${where} (${code})`, code, response.status);
  }
}

/**
 * The error for a request that got no answer: the key store is down (or unreachable from
 * Zapier). `code` is the network's reason (ECONNREFUSED, ENOTFOUND, ETIMEDOUT...).
 */
function unreachable(z, bundle, error) {
  const reason = error.code || error.name || 'no answer';
  const failed = new z.errors.ThrottledError(`The key store at ${baseUrl(bundle)} did not answer `
    + `(${reason}). Zapier runs this step again later.`, MIN_OUTAGE_DELAY_SECONDS);
  failed.reason = reason;
  return failed;
}

/**
 * One request with the connection's token; resolves with Zapier's response for any HTTP
 * status (the caller reads it) and rejects only when no answer came (unreachable()).
 */
async function send(z, bundle, { method, path, body, params }) {
  try {
    return await z.request({
      method,
      url: `${baseUrl(bundle)}${path}`,
      params,
      body,
      headers: { Authorization: `Bearer ${bundle.authData.token}`, Accept: 'application/json' },
      // Every non-2xx answer is mapped by the caller, by the key store's error code.
      skipThrowForStatus: true,
      throwForThrottlingEarly: false,
    });
  } catch (error) {
    throw unreachable(z, bundle, error);
  }
}

/**
 * Send one request to the key store.
 * @param {object} z  Zapier's z object
 * @param {object} bundle  the bundle (authData.url and authData.token are used)
 * @param {{method: string, path: string, body?: object, params?: object,
 *          absentOk?: boolean, onceMore?: boolean}} request  absentOk: answer null for an
 *        unknown or expired key; onceMore: a request that got no answer is sent once more,
 *        at once and as it was (a claim: its proposed lease token resumes what a lost one
 *        acquired)
 * @returns {Promise<object|null>} the JSON body of a 2xx answer
 * @throws the Zapier error for any other answer (toZapierError), or unreachable()'s
 */
async function call(z, bundle, { method, path, body, params, absentOk = false, onceMore = false }) {
  const request = { method, path, body, params };
  let response;
  try {
    response = await send(z, bundle, request);
  } catch (error) {
    if (!onceMore) throw error;
    response = await send(z, bundle, request);
  }
  if (response.status >= 200 && response.status < 300) return response.data;
  if (absentOk && response.status === 404) {
    const code = response.data && response.data.error && response.data.error.code;
    if (code === 'not_found' || code === 'expired') return null;
  }
  throw toZapierError(z, response);
}

module.exports = { call, send, toZapierError, baseUrl };
