'use strict';
/**
 * Test helpers: Node-RED 4 in-process (node-red-node-test-helper), the package's nodes plus
 * the core nodes the flows use, the real key store named by the environment (started by
 * `npm test`), and a bounded wait.
 */
const crypto = require('node:crypto');
const http = require('node:http');
const helper = require('node-red-node-test-helper');
const { keystoreFromEnv } = require('../../test-support/sink');

helper.init(require.resolve('node-red'));

// The test helper gives "http in" nodes an express app (RED.httpNode) that no server serves;
// this wrapper keeps hold of it so serveHttpNodes() can put it on a loopback port.
const httpIn = require('@node-red/nodes/core/network/21-httpin');
let httpNodeApp = null;
function httpInNodes(RED) {
  httpNodeApp = RED.httpNode;
  return httpIn(RED);
}

/**
 * Serve the loaded flow's "http in" endpoints on 127.0.0.1 (on `port`, default a free one);
 * resolves to {url, close}.
 */
async function serveHttpNodes(port = 0) {
  const server = http.createServer((req, res) => httpNodeApp(req, res));
  await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

// node-red-node-test-helper 0.3.6 runs its core "catch" module once per Catch node of a flow,
// and Node-RED refuses the second registration ("catch already registered"): a flow with two
// Catch nodes (the webhook example) would not load. It is loaded once, with the nodes below.
const catchNodes = helper._nodeModules.catch;
delete helper._nodeModules.catch;

const NODES = [
  catchNodes,
  require('../nodes/keystore-config'),
  require('../nodes/keystore-guard'),
  require('../nodes/keystore-complete'),
  require('../nodes/keystore-release'),
  require('../nodes/keystore-send'),
  require('@node-red/nodes/core/function/10-function'),
  require('@node-red/nodes/core/function/15-change'),
  require('@node-red/nodes/core/function/89-delay'),
  require('@node-red/nodes/core/network/21-httprequest'),
  httpInNodes,
  require('@node-red/nodes/core/common/21-debug'),
  require('@node-red/nodes/core/common/90-comment'),
  require('@node-red/nodes/core/common/20-inject'),
];

const keystore = keystoreFromEnv();

/**
 * Load a flow with a "keystore-config" node `ks` (token in the credentials, as the editor
 * stores it) and the given nodes (`credentials`: other nodes' credentials, by id; `url`:
 * another address of the key store, such as a test's proxy in front of it). Returns
 * {get(id), collect(id)}: collect() gives the live array of messages that reach a "helper" node.
 */
async function loadFlow(flowNodes, { token = keystore.token, credentials = {}, url = keystore.url } = {}) {
  const config = { id: 'ks', type: 'keystore-config', url, timeout: '30' };
  const tab = { id: 'tab', type: 'tab', label: 'test' };
  await helper.load(NODES, [tab, config, ...flowNodes.map((n, i) => ({ z: 'tab', x: 200, y: 40 * (i + 1), ...n }))],
    { ks: { token }, ...credentials });
  return {
    get: (id) => helper.getNode(id),
    collect(id) {
      const messages = [];
      helper.getNode(id).on('input', (msg) => messages.push(msg));
      return messages;
    },
  };
}

/** Resolves when predicate() is true; rejects after timeoutMs (never a fixed sleep). */
async function waitUntil(predicate, what, timeoutMs = 45_000) {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * Load an example flow from examples/ as a user would import it, with its key-store config
 * node pointed at the test's key store (token in the credentials) and `patch` applied to
 * other nodes by id ({id: {property: value}}). `store` ({url, token}): another key store than
 * the one `npm test` started (a test that stops its own).
 */
async function loadExample(file, patch = {}, store = keystore) {
  const flow = require(`../examples/${file}`).map((n) => ({ ...n, ...(patch[n.id] || {}) }));
  const configs = flow.filter((n) => n.type === 'keystore-config');
  for (const config of configs) Object.assign(config, { url: store.url, timeout: '30' });
  const credentials = Object.fromEntries(configs.map((n) => [n.id, { token: store.token }]));
  await helper.load(NODES, flow, credentials);
  return flow;
}

const eventId = (name) => `${name}-${crypto.randomUUID()}`;

module.exports = { helper, loadFlow, loadExample, serveHttpNodes, waitUntil, eventId, keystore, NODES };
