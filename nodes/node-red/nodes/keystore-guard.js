'use strict';
/**
 * "idempotency guard": claims the message's operation key before the side effect and routes
 * the message to New / Already done / Needs attention (see lib/guard.js, docs/outcomes.md).
 * Puts the claim on msg.keystore: {scope, key, outcome, lease_token (New only), attempt,
 * result, record}. Errors go to Catch nodes, with msg.keystore.outcome set to the error code:
 * try later (another message still holds the key after the wait: `in_progress`, with
 * retry_after; the key store unreachable or failing) and anything else the key store refused.
 */
const { guard, MAX_WAIT_SECONDS } = require('../lib/guard');
const { evaluate } = require('../lib/properties');

const STATUS = [
  { fill: 'green', shape: 'dot', text: 'new' },
  { fill: 'grey', shape: 'dot', text: 'already done' },
  { fill: 'yellow', shape: 'ring', text: 'needs attention' },
];

module.exports = function register(RED) {
  function positiveInt(value) {
    const number = Number(value);
    return value !== '' && value !== undefined && Number.isInteger(number) && number > 0 ? number : undefined;
  }

  function KeystoreGuardNode(config) {
    RED.nodes.createNode(this, config);
    const node = this;
    const server = RED.nodes.getNode(config.server);
    // the key store holds a duplicate at most 30 s (docs/api.md's limit for one claim)
    const waitSeconds = Math.min(Math.max(0, Number(config.waitSeconds ?? 10) || 0), MAX_WAIT_SECONDS);

    node.on('input', async (msg, send, done) => {
      let scope;
      let key;
      try {
        if (!server) throw new Error('no key store is configured on this guard');
        scope = config.scope;
        key = await evaluate(RED, node, msg, config.key, config.keyType);
        if (key === undefined || key === null || key === '') {
          throw new Error(`the operation key (${config.keyType}.${config.key}) is empty`);
        }
        key = String(key);
        const payload = await evaluate(RED, node, msg, config.payload, config.payloadType);
        const claim = {
          scope,
          key,
          payload: payload === undefined ? undefined : payload,
          lease_seconds: positiveInt(config.leaseSeconds),
          ttl_seconds: positiveInt(config.ttlSeconds),
          on_stale: config.onStale || undefined,
        };
        const { output, keystore } = await guard(server.connection(), claim, waitSeconds);
        msg.keystore = keystore;
        node.status(STATUS[output]);
        const outputs = [null, null, null];
        outputs[output] = msg;
        send(outputs);
        done();
      } catch (error) {
        msg.keystore = { scope, key, outcome: error.code || 'error',
          retry_after: error.retryAfter ?? null, record: error.record ?? null };
        node.status({ fill: 'red', shape: 'ring', text: error.code || 'error' });
        done(error);
      }
    });
  }

  RED.nodes.registerType('keystore-guard', KeystoreGuardNode);
};
