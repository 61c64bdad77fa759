'use strict';
/**
 * Config node "keystore-config": where the key store is and the token to use.
 * The token lives in Node-RED's credentials store (flows_cred.json, encrypted), never in the
 * flow file, and is not exported with the flow.
 *
 * Its edit dialog has a "Check connection" button: POST <admin>/keystore-config/check with
 * {id, url, token} asks the key store who the token is (lib/check.js) and answers 200
 * {ok, message, tenant?, role?, token?}. The token field holds a placeholder until the user
 * types a new one; then the check uses the token stored for node `id`. Editors with write
 * access to this node type only; the answer never contains the token itself.
 */
const { checkConnection } = require('../lib/check');

// What the editor sends for a password credential the user has not changed.
const UNCHANGED_PASSWORD = '__PWRD__';
// The connection check answers the editor; 10 s without an answer means nothing usable listens.
const CHECK_TIMEOUT_MS = 10_000;

module.exports = function register(RED) {
  function KeystoreConfigNode(config) {
    RED.nodes.createNode(this, config);
    this.url = config.url;
    // Seconds for one request (a lookup that waits gets its wait on top).
    this.timeoutMs = (Number(config.timeout) || 10) * 1000;
  }

  /** What lib/client.js needs to make a request. */
  KeystoreConfigNode.prototype.connection = function connection() {
    return { url: this.url, token: (this.credentials && this.credentials.token) || '',
      timeoutMs: this.timeoutMs };
  };

  RED.nodes.registerType('keystore-config', KeystoreConfigNode, {
    credentials: { token: { type: 'password' } },
  });

  RED.httpAdmin.post('/keystore-config/check', RED.auth.needsPermission('keystore-config.write'),
    async (req, res) => {
      const { id, url, token } = req.body || {};
      if (typeof url !== 'string' || (token !== undefined && typeof token !== 'string')
        || (id !== undefined && typeof id !== 'string')) {
        res.status(400).json({ ok: false, message: 'send {id, url, token} as strings' });
        return;
      }
      let secret = token;
      if (!secret || secret === UNCHANGED_PASSWORD) {
        // only a key store config node's token: never another node's secret sent to this URL
        const deployed = id ? RED.nodes.getNode(id) : null;
        const stored = deployed && deployed.type === 'keystore-config' ? RED.nodes.getCredentials(id) : null;
        secret = (stored && stored.token) || '';
      }
      if (!secret) {
        res.json({ ok: false, message: 'no token: enter the client token first' });
        return;
      }
      res.json(await checkConnection({ url, token: secret, timeoutMs: CHECK_TIMEOUT_MS }));
    });
};
