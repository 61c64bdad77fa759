'use strict';
/**
 * An n8n execution context for running a node's execute() outside n8n: what the nodes use of
 * IExecuteFunctions, with parameters as values or functions of (item, index). The HTTP helper
 * does what n8n's httpRequestWithAuthentication does for these options (credential header,
 * qs, JSON body, timeout, full response, status errors ignored), over Node's fetch, against
 * the real key store. The e2e tests run the same nodes inside a real n8n.
 */
const path = require('node:path');

const DIST = path.resolve(__dirname, '../../dist');

function load(relative) {
	return require(path.join(DIST, relative));
}

async function httpRequest(credentials, options) {
	const url = new URL(options.url);
	for (const [name, value] of Object.entries(options.qs ?? {})) url.searchParams.set(name, String(value));
	const headers = { Accept: 'application/json', Authorization: `Bearer ${credentials.token}` };
	let body;
	if (options.body !== undefined && options.method !== 'GET') {
		headers['Content-Type'] = 'application/json';
		body = JSON.stringify(options.body);
	}
	const response = await fetch(url, {
		method: options.method,
		headers,
		body,
		signal: AbortSignal.timeout(options.timeout ?? 300_000),
	});
	const text = await response.text();
	const type = response.headers.get('content-type') ?? '';
	const parsed = type.includes('json') && text ? JSON.parse(text) : text;
	if (!options.ignoreHttpStatusErrors && response.status >= 400) {
		throw Object.assign(new Error(`HTTP ${response.status}`), { httpCode: response.status });
	}
	if (!options.returnFullResponse) return parsed;
	return { statusCode: response.status, body: parsed, headers: Object.fromEntries(response.headers) };
}

/**
 * A context for one execute() call.
 * @param items      input items' JSON objects
 * @param params     parameter name -> value, or (json, index) => value
 * @param credentials {url, token}
 * @param onError  the node's Settings > On Error (`continueErrorOutput`...); with it, set
 *                 continueOnFail too, as n8n does
 * @param responses  collects what the node sends with sendResponse() (a webhook's answer)
 */
function context({ items, params, credentials, continueOnFail = false, onError, calls = [], responses = [] }) {
	const inputs = items.map((json) => ({ json }));
	const node = { id: 'test', name: 'Node Under Test', type: 'test', typeVersion: 1, position: [0, 0], parameters: {}, onError };
	return {
		calls,
		getInputData: () => inputs,
		getNode: () => node,
		continueOnFail: () => continueOnFail,
		// n8n answers a webhook waiting for a Respond to Webhook node with the first call
		sendResponse: async (response) => {
			responses.push(response);
		},
		getCredentials: async () => credentials,
		getNodeParameter(name, index, fallback) {
			const value = params[name];
			if (value === undefined) {
				if (arguments.length >= 3) return fallback;
				throw new Error(`parameter ${name} is not set in this test`);
			}
			return typeof value === 'function' ? value(inputs[index].json, index) : value;
		},
		helpers: {
			async httpRequestWithAuthentication(credentialName, options) {
				if (credentialName !== 'idempotencyKeyStoreApi') throw new Error(`unknown credential ${credentialName}`);
				calls.push({ method: options.method, url: options.url, body: options.body, qs: options.qs });
				return httpRequest(credentials, options);
			},
		},
	};
}

/**
 * What n8n gives a credential test function (ICredentialTestFunctions): only the legacy
 * `helpers.request`, here for the options the nodes use (uri, headers, json, timeout,
 * simple: false = every status resolves, resolveWithFullResponse), over Node's fetch. A
 * request without an answer rejects with the network error's `code`, as n8n's does.
 */
function credentialTestContext() {
	return {
		helpers: {
			async request(options) {
				let response;
				try {
					response = await fetch(options.uri, {
						method: options.method,
						headers: options.headers,
						signal: AbortSignal.timeout(options.timeout ?? 300_000),
					});
				} catch (error) {
					throw Object.assign(new Error(error.message), { code: error.cause?.code ?? error.name });
				}
				const text = await response.text();
				let body = text;
				try {
					if (options.json) body = JSON.parse(text);
				} catch {
					// not JSON: the text, as n8n's helper gives it
				}
				if (options.simple !== false && response.status >= 400) throw new Error(`HTTP ${response.status}`);
				return options.resolveWithFullResponse ? { statusCode: response.status, body } : body;
			},
		},
	};
}

/** Runs a node class's execute() with a context; resolves with its outputs. */
async function run(NodeClass, options) {
	const node = new NodeClass();
	return node.execute.call(context(options));
}

module.exports = { context, credentialTestContext, run, load, DIST };
