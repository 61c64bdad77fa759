'use strict';
/**
 * Test helpers: the app under Zapier's own runner (createAppTester), the real key store named
 * by the environment (started by `npm test`), and Zapier's error payloads made readable.
 */
const crypto = require('node:crypto');
const zapier = require('zapier-platform-core');
const App = require('../index');
const { keystoreFromEnv } = require('../../test-support/sink');

const appTester = zapier.createAppTester(App);
const keystore = keystoreFromEnv();
const authData = { url: keystore.url, token: keystore.token };

/** Run one operation of the app the way Zapier does, with the given input. */
const run = (operation, inputData, auth = authData) =>
  appTester(operation.operation.perform, { authData: auth, inputData });

/** A fresh trigger-item id, so tests sharing one key store never share a key. */
const itemId = (name) => `${name}-${crypto.randomUUID()}`;

/**
 * z.errors.Error and ThrottledError carry JSON in their message; HaltedError and
 * ExpiredAuthError a plain text. Returns {name, message, code, status, delay}.
 */
function zapierError(error) {
  try {
    return { name: error.name, ...JSON.parse(error.message) };
  } catch {
    return { name: error.name, message: error.message };
  }
}

/** Awaits a promise that must reject; returns zapierError() of the rejection. */
async function rejection(promise) {
  try {
    await promise;
  } catch (error) {
    return zapierError(error);
  }
  throw new Error('expected the operation to fail, but it succeeded');
}

module.exports = { App, run, authData, itemId, rejection };
