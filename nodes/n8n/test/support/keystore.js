'use strict';
/**
 * The n8n tests' key store: the packages' shared real, killable key store
 * (nodes/test-support/keystore-server.js: start, halt, resume, stop, tokens, api).
 */
module.exports = require('../../../test-support/keystore-server');
