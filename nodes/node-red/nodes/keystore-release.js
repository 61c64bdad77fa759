'use strict';
/**
 * "idempotency release": gives the attempt on msg.keystore back when the side effect did NOT
 * happen (typically after a Catch node), so the next delivery of the message is "New" again.
 * A message without a lease token (already completed or released, or never claimed) and a
 * record that is already finished pass through unchanged: there is nothing to give back.
 * The reason is the node's text, else the caught error's message (msg.error.message).
 * Errors (lease_lost: another attempt took over; unreachable) go to Catch nodes.
 */
const { call, raise } = require('../lib/client');
const { oneLine } = require('../lib/properties');

module.exports = function register(RED) {
  function KeystoreReleaseNode(config) {
    RED.nodes.createNode(this, config);
    const node = this;
    const server = RED.nodes.getNode(config.server);

    node.on('input', async (msg, send, done) => {
      try {
        if (!server) throw new Error('no key store is configured on this node');
        const claim = msg.keystore || {};
        if (!claim.lease_token) {
          node.status({ fill: 'grey', shape: 'ring', text: 'nothing to release' });
          send(msg);
          return done();
        }
        const reason = config.reason || (msg.error && msg.error.message) || undefined;
        const answer = await call(server.connection(), 'POST', '/v1/release', { body: {
          scope: claim.scope, key: claim.key, lease_token: claim.lease_token,
          reason: reason === undefined ? undefined : oneLine(reason),
        } });
        const code = answer.body.error && answer.body.error.code;
        if (answer.status !== 200 && code !== 'already_completed') throw raise(answer);
        const { record } = answer.body;
        msg.keystore = { scope: claim.scope, key: claim.key,
          outcome: answer.status === 200 ? 'released' : 'already_completed',
          attempt: record ? record.attempt : claim.attempt, state: record ? record.state : null, record };
        node.status({ fill: 'blue', shape: 'dot', text: msg.keystore.outcome });
        send(msg);
        done();
      } catch (error) {
        node.status({ fill: 'red', shape: 'ring', text: error.code || 'error' });
        done(error);
      }
    });
  }

  RED.nodes.registerType('keystore-release', KeystoreReleaseNode);
};
