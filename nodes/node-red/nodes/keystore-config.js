'use strict';
/**
 * Config node "keystore-config": where the key store is and the token to use.
 * The token lives in Node-RED's credentials store (flows_cred.json, encrypted), never in the
 * flow file, and is not exported with the flow.
 */
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
};
