'use strict';
/**
 * "idempotency complete": records the result of the side effect with the lease token on
 * msg.keystore (put there by the guard's New output), then passes the message on with
 * msg.keystore.outcome "completed" and no lease token any more. The stored result is what
 * every later duplicate gets on the guard's "Already done" output.
 * Errors (lease_lost: another attempt took over; already_completed; unreachable) go to Catch
 * nodes; completing twice with the same token and result is harmless.
 */
const { call, raise } = require('../lib/client');
const { evaluate } = require('../lib/properties');

module.exports = function register(RED) {
  async function result(node, config, msg) {
    const out = {};
    const resourceId = await evaluate(RED, node, msg, config.resourceId, config.resourceIdType);
    if (resourceId !== undefined && resourceId !== null && resourceId !== '') out.resource_id = String(resourceId);
    const statusCode = Number(await evaluate(RED, node, msg, config.statusCode, config.statusCodeType));
    if (Number.isInteger(statusCode) && statusCode >= 100 && statusCode <= 599) out.status_code = statusCode;
    const body = await evaluate(RED, node, msg, config.body, config.bodyType);
    if (body !== undefined) out.body = body;
    return out;
  }

  function KeystoreCompleteNode(config) {
    RED.nodes.createNode(this, config);
    const node = this;
    const server = RED.nodes.getNode(config.server);

    node.on('input', async (msg, send, done) => {
      try {
        if (!server) throw new Error('no key store is configured on this node');
        const claim = msg.keystore || {};
        if (!claim.lease_token) {
          throw new Error('msg.keystore has no lease token: wire this node after the "New" '
            + 'output of an idempotency guard');
        }
        const answer = await call(server.connection(), 'POST', '/v1/complete', { body: {
          scope: claim.scope, key: claim.key, lease_token: claim.lease_token,
          state: config.state || 'succeeded', result: await result(node, config, msg),
        } });
        if (answer.status !== 200) throw raise(answer);
        const { record } = answer.body;
        msg.keystore = { scope: claim.scope, key: claim.key, outcome: 'completed',
          attempt: record.attempt, state: record.state, result: record.result, record };
        node.status({ fill: 'green', shape: 'dot', text: record.state });
        send(msg);
        done();
      } catch (error) {
        node.status({ fill: 'red', shape: 'ring', text: error.code || 'error' });
        done(error);
      }
    });
  }

  RED.nodes.registerType('keystore-complete', KeystoreCompleteNode);
};
