'use strict';
/**
 * The config node's "Check connection" (POST <admin>/keystore-config/check): GET /v1/whoami,
 * with the URL and token from the edit dialog or, for the placeholder of an unchanged
 * password, the token stored for the deployed config node.
 */
const { it, before, after, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { freePort } = require('../../test-support/keystore-server');
const { helper, loadFlow, keystore } = require('./support');

let other; // another service: answers 404 with JSON of its own, as a wrong URL would
before(async () => {
  other = http.createServer((req, res) => {
    res.writeHead(404, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ message: 'no such route' }));
  });
  await new Promise((resolve) => other.listen(0, '127.0.0.1', resolve));
});
after(() => other.close());
afterEach(() => helper.unload());

async function check(body) {
  const response = await helper.request().post('/keystore-config/check').send(body);
  return { status: response.status, ...response.body };
}

it('names the tenant and role of a good token, typed in or stored for the deployed node', async () => {
  await loadFlow([]);
  const typed = await check({ id: 'new-config', url: `${keystore.url}/`, token: keystore.token });
  assert.deepEqual([typed.status, typed.ok, typed.tenant, typed.role], [200, true, 'default', 'client']);
  assert.match(typed.message, /^connected: tenant "default", client token "/);
  const stored = await check({ id: 'ks', url: keystore.url, token: '__PWRD__' });
  assert.deepEqual([stored.ok, stored.tenant], [true, 'default']);
  assert.equal(JSON.stringify(typed).includes(keystore.token), false, 'the token never comes back');
});

it('fails a wrong token, a URL ending in /v1, an unreachable host and another service, each saying so', async () => {
  await loadFlow([]);
  const wrong = await check({ url: keystore.url, token: 'ks_wrong' });
  assert.deepEqual([wrong.ok, /refused this token/.test(wrong.message)], [false, true], wrong.message);
  for (const url of [`${keystore.url}/v1`, `${keystore.url}/v1/`]) {
    const withV1 = await check({ url, token: keystore.token });
    assert.deepEqual([withV1.ok, withV1.message],
      [false, `remove /v1 from the URL: the nodes add it themselves. Use ${keystore.url}`]);
  }
  const nobody = `http://127.0.0.1:${await freePort()}`; // a port nothing listens on
  const dead = await check({ url: nobody, token: keystore.token });
  assert.deepEqual([dead.ok, dead.message], [false, `the key store at ${nobody} did not answer (ECONNREFUSED)`]);
  const elsewhere = await check({ url: `http://127.0.0.1:${other.address().port}`, token: keystore.token });
  assert.deepEqual([elsewhere.ok, /^no Idempotency Key Store answered at .* \(HTTP 404\)/.test(elsewhere.message)],
    [false, true], elsewhere.message);
});

it('refuses a malformed request with 400 and a check without any token without calling out', async () => {
  await loadFlow([]);
  assert.equal((await check({ url: 42 })).status, 400);
  assert.equal((await check({ url: keystore.url, token: ['x'] })).status, 400);
  const none = await check({ id: 'no-such-node', url: keystore.url, token: '__PWRD__' });
  assert.deepEqual([none.status, none.ok, none.message], [200, false, 'no token: enter the client token first']);
  const notUrl = await check({ url: 'keystore:8080', token: keystore.token });
  assert.equal(notUrl.ok, false);
  const lineBreak = await check({ url: `${keystore.url}/\r\nX-Injected: 1`, token: keystore.token });
  assert.deepEqual([lineBreak.ok, /control characters/.test(lineBreak.message)], [false, true]);
});

it("never sends another node's stored secret: only a key store config node's token is used", async () => {
  // a node of another type whose credentials happen to have a `token`
  await loadFlow([{ id: 'other', type: 'helper' }], { credentials: { other: { token: keystore.token } } });
  assert.equal(helper._redNodes.getCredentials('other').token, keystore.token);
  const borrowed = await check({ id: 'other', url: keystore.url, token: '__PWRD__' });
  assert.deepEqual([borrowed.ok, borrowed.message], [false, 'no token: enter the client token first']);
});
