'use strict';
/**
 * "keystore send": has the key store make the message's API request once per operation key,
 * with a connection's credentials (kept sealed in the key store, never in the flow), and
 * routes the message by the answer (lib/send.js, docs/outcomes.md): sent / failed / accepted /
 * needs attention; errors (try later: in_progress, the key store down) go to Catch nodes with
 * msg.keystore.outcome set to the code. On "sent" and "failed" msg.payload is the API's
 * answer body and msg.statusCode its status, as an http request node would set them;
 * msg.keystore carries {scope, key, connection, outcome, state, status_code, resource_id,
 * result, record}.
 */
const { sendOnce, MAX_WAIT_SECONDS, METHODS, SENT, FAILED } = require('../lib/send');
const { evaluate } = require('../lib/properties');

const STATUS = [
  { fill: 'green', shape: 'dot', text: 'sent' },
  { fill: 'red', shape: 'dot', text: 'failed' },
  { fill: 'blue', shape: 'ring', text: 'accepted' },
  { fill: 'yellow', shape: 'ring', text: 'needs attention' },
];

module.exports = function register(RED) {
  async function request(node, config, msg) {
    const method = METHODS.includes(config.method) ? config.method : 'POST';
    const path = await evaluate(RED, node, msg, config.path, config.pathType || 'str');
    const out = { method, path: String(path ?? '') };
    const body = await evaluate(RED, node, msg, config.body, config.bodyType);
    if (body !== undefined) out.json = body;
    const headers = await evaluate(RED, node, msg, config.headers, config.headersType);
    if (headers && typeof headers === 'object' && Object.keys(headers).length > 0) out.headers = headers;
    return out;
  }

  function KeystoreSendNode(config) {
    RED.nodes.createNode(this, config);
    const node = this;
    const server = RED.nodes.getNode(config.server);
    const waitSeconds = Math.min(Math.max(0, Number(config.waitSeconds ?? 10) || 0), MAX_WAIT_SECONDS);

    node.on('input', async (msg, send, done) => {
      let key;
      try {
        if (!server) throw new Error('no key store is configured on this node');
        key = await evaluate(RED, node, msg, config.key, config.keyType);
        if (key === undefined || key === null || key === '') {
          throw new Error(`the operation key (${config.keyType}.${config.key}) is empty`);
        }
        key = String(key);
        const wire = { scope: config.scope, key, connection: config.connection,
          request: await request(node, config, msg) };
        const payload = await evaluate(RED, node, msg, config.payload, config.payloadType);
        if (payload !== undefined) wire.payload = payload;
        if (config.resourceIdPointer) wire.resource_id_pointer = config.resourceIdPointer;
        const { output, keystore } = await sendOnce(server.connection(), wire, waitSeconds);
        msg.keystore = keystore;
        if (output === SENT || output === FAILED) {
          msg.payload = keystore.result ? keystore.result.body ?? null : null;
          msg.statusCode = keystore.status_code;
        }
        node.status(STATUS[output]);
        const outputs = [null, null, null, null];
        outputs[output] = msg;
        send(outputs);
        done();
      } catch (error) {
        msg.keystore = { scope: config.scope, key, connection: config.connection,
          outcome: error.code || 'error', retry_after: error.retryAfter ?? null, record: error.record ?? null };
        node.status({ fill: 'red', shape: 'ring', text: error.code || 'error' });
        done(error);
      }
    });
  }

  RED.nodes.registerType('keystore-send', KeystoreSendNode);
};
