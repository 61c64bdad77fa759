'use strict';
/** The connection test, as Zapier runs it when a user connects an account. */
const { it } = require('node:test');
const assert = require('node:assert/strict');
const zapier = require('zapier-platform-core');
const { App, run, authData, itemId, rejection } = require('./support');
const { startSink } = require('../../test-support/sink');
const { freePort } = require('../../test-support/keystore-server');

const appTester = zapier.createAppTester(App);

it('passes with the right URL and token, and labels the connection with tenant and role', async () => {
  const result = await appTester(App.authentication.test, { authData: { ...authData, url: `${authData.url}/` } });
  assert.deepEqual(result, { url: authData.url, tenant: 'default', role: 'client', token: 'client-1' });
  assert.equal(App.authentication.connectionLabel,
    '{{bundle.inputData.tenant}} ({{bundle.inputData.role}}) at {{bundle.inputData.url}}');
});

it('fails a URL ending in /v1 before any request, naming the URL to use', async () => {
  for (const url of [`${authData.url}/v1`, `${authData.url}/v1/`]) {
    const error = await rejection(appTester(App.authentication.test, { authData: { ...authData, url } }));
    assert.deepEqual([error.code, error.status], ['invalid_url', 400]);
    assert.equal(error.message, `Remove /v1 from the Key Store URL: the app adds it itself. Use ${authData.url}`);
  }
});

it('fails a URL with a line break or a tab in it, instead of letting the parser drop them', async () => {
  for (const url of [`${authData.url}/\r\nX-Injected: 1`, `${authData.url}/v\t1`]) {
    const error = await rejection(appTester(App.authentication.test, { authData: { ...authData, url } }));
    assert.deepEqual([error.code, /control characters/.test(error.message)], ['invalid_url', true]);
  }
});

it('fails when nothing answers at the URL, saying so', async () => {
  const url = `http://127.0.0.1:${await freePort()}`; // a port nothing listens on
  const error = await rejection(appTester(App.authentication.test, { authData: { ...authData, url } }));
  assert.deepEqual([error.name, error.code, error.status], ['AppError', 'unreachable', 503]);
  assert.match(error.message, new RegExp(`^The key store at ${url} did not answer \\(ECONNREFUSED\\)`));
});

it('fails with a wrong token, saying so', async () => {
  const error = await rejection(appTester(App.authentication.test,
    { authData: { ...authData, token: 'ks_this-token-was-never-issued' } }));
  assert.equal(error.code, 'unauthorized');
  assert.equal(error.status, 401);
  assert.match(error.message, /refused this token/);
});

it('fails when the URL is not a key store', async () => {
  const sink = await startSink();
  try {
    const error = await rejection(appTester(App.authentication.test,
      { authData: { ...authData, url: sink.url } }));
    assert.equal(error.status, 404);
    assert.equal(error.code, 'http_404');
  } finally {
    await sink.close();
  }
});

it('asks the user to reconnect when an action meets a refused token', async () => {
  const error = await rejection(run(App.creates.claim, { scope: 's', key: itemId('k') },
    { ...authData, token: 'ks_revoked' }));
  assert.equal(error.name, 'ExpiredAuthError');
  assert.match(error.message, /Reconnect/);
});
