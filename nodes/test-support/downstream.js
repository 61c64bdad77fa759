'use strict';
/**
 * A downstream API on 127.0.0.1 for the workflow packages' send tests: the invoices API that a
 * key store connection points at (the JavaScript sibling of tests/support/downstream.py).
 *
 *   POST <any>/invoices   creates {"id": "in_<n>", ...the JSON body}, 201
 *   anything else         404
 *
 * Every request is kept (`requests`: method, path, headers in lower case, parsed body). A
 * request's key is its `Idempotency-Key` header, else its body's `reference` (a connection
 * without an idempotency header). `script(key, {status, body, delayMs, create})`
 * answers that key's next request so instead: `status` and `body` without creating anything
 * (a refusal: 422), after creating when `create`, after `delayMs` (a slow API).
 *
 *   const api = await startDownstream();
 *   api.script('invoices:order-7', { status: 422, body: { error: 'total must be positive' } });
 *   ... api.requestsFor('invoices:order-7'), api.created
 *   await api.close();
 */
const http = require('node:http');

function keyOf({ headers, body }) {
	return headers['idempotency-key'] ?? (body && typeof body === 'object' ? (body.reference ?? null) : null);
}

async function startDownstream() {
	const requests = [];
	const created = [];
	const scripts = new Map();
	const server = http.createServer((req, res) => {
		let text = '';
		req.setEncoding('utf8');
		req.on('data', (chunk) => {
			text += chunk;
		});
		req.on('end', async () => {
			let body = null;
			try {
				body = text ? JSON.parse(text) : null;
			} catch {
				body = text;
			}
			const got = { method: req.method, path: req.url, headers: req.headers, body };
			requests.push(got);
			const key = keyOf(got);
			const queued = key === null ? undefined : scripts.get(key)?.shift();
			const reply = (status, data) => {
				res.writeHead(status, { 'Content-Type': 'application/json' });
				res.end(JSON.stringify(data));
			};
			if (req.method !== 'POST' || !/\/invoices$/.test(req.url.split('?')[0])) return reply(404, { error: 'not found' });
			if (queued?.delayMs) await new Promise((resolve) => setTimeout(resolve, queued.delayMs));
			if (queued && !queued.create) return reply(queued.status, queued.body ?? null);
			const invoice = { id: `in_${created.length + 1}`, ...(body && typeof body === 'object' ? body : {}) };
			created.push({ key, invoice });
			return reply(queued?.status ?? 201, queued?.body ?? invoice);
		});
	});
	await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
	return {
		url: `http://127.0.0.1:${server.address().port}`,
		requests,
		created,
		script(key, answer) {
			if (!scripts.has(key)) scripts.set(key, []);
			scripts.get(key).push(answer);
		},
		requestsFor: (key) => requests.filter((r) => keyOf(r) === key),
		close: () =>
			new Promise((resolve) => {
				server.closeAllConnections();
				server.close(resolve);
			}),
	};
}

module.exports = { startDownstream };
