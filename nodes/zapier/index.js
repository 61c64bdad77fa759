'use strict';
/**
 * The Zapier app definition of the Idempotency Key Store: one file per operation, one
 * transport (lib/transport.js) that turns the key store's error codes into Zapier errors.
 */
const authentication = require('./authentication');
const claim = require('./creates/claim');
const complete = require('./creates/complete');
const release = require('./creates/release');
const send = require('./creates/send');
const find = require('./searches/find');

module.exports = {
  version: require('./package.json').version,
  platformVersion: require('zapier-platform-core').version,
  authentication,
  triggers: {},
  creates: {
    [claim.key]: claim,
    [complete.key]: complete,
    [release.key]: release,
    [send.key]: send,
  },
  searches: {
    [find.key]: find,
  },
};
