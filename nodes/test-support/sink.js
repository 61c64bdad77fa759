'use strict';
/**
 * A local effect sink: the "side effect" of the tests' workflows, counted.
 *
 * POST /effects with a JSON body records one effect and answers 201 {"id": "eff-N"}.
 * `failNext(n, before)` makes the next n POSTs answer 503 WITHOUT recording anything: a
 * transient failure before the effect happened; `before` (optional, async) runs before each
 * of those answers (a test stops the key store there). `effects` is every recorded body.
 * It listens on 127.0.0.1 only, on a free port.
 */
const http = require('node:http');

async function startSink() {
  const effects = [];
  let failures = 0;
  let beforeFailure = null;
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      const reply = (status, data) => {
        res.writeHead(status, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify(data));
      };
      if (req.method !== 'POST' || req.url !== '/effects') return reply(404, { error: 'not found' });
      if (failures > 0) {
        failures -= 1;
        return Promise.resolve(beforeFailure && beforeFailure())
          .then(() => reply(503, { error: 'try again' }), () => reply(503, { error: 'try again' }));
      }
      effects.push(JSON.parse(body || 'null'));
      return reply(201, { id: `eff-${effects.length}` });
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/effects`,
    effects,
    failNext(n, before = null) { failures = n; beforeFailure = before; },
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/** POST one effect to the sink; resolves to the sink's answer {status, body}. */
async function sendEffect(url, data) {
  const response = await fetch(url, {
    method: 'POST', body: JSON.stringify(data), headers: { 'Content-Type': 'application/json' },
    signal: AbortSignal.timeout(10_000),
  });
  return { status: response.status, body: await response.json() };
}

/** The key store named by the environment (set by with-keystore.js), or a clear failure. */
function keystoreFromEnv() {
  const { KEYSTORE_URL: url, KEYSTORE_TOKEN: token } = process.env;
  if (!url || !token) {
    throw new Error('KEYSTORE_URL and KEYSTORE_TOKEN are not set: run the tests with `npm test`, '
      + 'which starts a real key store through nodes/test-support/with-keystore.js');
  }
  return { url, token };
}

module.exports = { startSink, sendEffect, keystoreFromEnv };
