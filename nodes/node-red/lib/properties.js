'use strict';
/**
 * Reading a node's typed-input properties (msg, flow, global, str, num, json, jsonata, and
 * the package's own `none`) from a message, as a promise.
 */

/**
 * @returns {Promise<*>} the value; undefined for type `none` or an absent msg property
 */
function evaluate(RED, node, msg, value, type) {
  if (type === 'none' || type === undefined || type === '') return Promise.resolve(undefined);
  return new Promise((resolve, reject) => {
    RED.util.evaluateNodeProperty(value, type, node, msg, (error, result) => {
      if (error) reject(error);
      else resolve(result);
    });
  });
}

/** Control characters are refused by the key store in a reason; keep it to one line. */
function oneLine(text, max = 512) {
  return String(text).replace(/[\u0000-\u001f\u007f-\u009f]+/g, ' ').trim().slice(0, max);
}

module.exports = { evaluate, oneLine };
