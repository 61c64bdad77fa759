'use strict';
/**
 * The effect sink: a tiny invoice API and order source on loopback that counts what was
 * created, so a test can say "one invoice". Like a careful real API, POST /invoices honours an
 * `Idempotency-Key` header (the same key returns the same invoice).
 *   POST /invoices                   create an invoice (201). The event id picks a behaviour, so
 *                                    the shipped workflow runs unchanged:
 *                                      slow-*   takes 800 ms (duplicates overlap the first)
 *                                      flaky-*  creates, but answers 500 to the first 2 calls
 *                                               per key: an API whose answer is lost
 *                                      down-*   503 without creating while `outage` is true
 *                                               (after awaiting `onOutage()`, if set)
 *   GET  /invoices                   every invoice created, in order
 *   PUT  /orders, GET /orders        the polling source's current list of changed orders
 *   POST /crm/orders, GET /crm/orders  upserts received by the "CRM", in order
 */
const http = require('node:http');

const SLOW_MS = 800; // long enough for 5 simultaneous deliveries to overlap the first one
const FLAKY_FAILURES = 2;

function readJson(request) {
	return new Promise((resolve, reject) => {
		const chunks = [];
		request.on('data', (chunk) => chunks.push(chunk));
		request.on('end', () => {
			const text = Buffer.concat(chunks).toString('utf8');
			try {
				resolve(text ? JSON.parse(text) : null);
			} catch (error) {
				reject(error);
			}
		});
		request.on('error', reject);
	});
}

class Sink {
	constructor() {
		this.invoices = [];
		this.byKey = new Map();
		this.callsByKey = new Map();
		this.outage = false;
		this.orders = [];
		this.upserts = [];
		this.server = http.createServer((request, response) => {
			this.handle(request, response).catch((error) => {
				response.writeHead(500, { 'Content-Type': 'application/json' });
				response.end(JSON.stringify({ error: String(error) }));
			});
		});
	}

	start() {
		return new Promise((resolve) => {
			this.server.listen(0, '127.0.0.1', () => {
				this.url = `http://127.0.0.1:${this.server.address().port}`;
				resolve(this);
			});
		});
	}

	stop() {
		this.server.closeAllConnections?.();
		return new Promise((resolve) => this.server.close(() => resolve()));
	}

	async handle(request, response) {
		const url = new URL(request.url, 'http://sink');
		const send = (status, body) => {
			response.writeHead(status, { 'Content-Type': 'application/json' });
			response.end(JSON.stringify(body));
		};
		const route = `${request.method} ${url.pathname}`;
		if (route === 'POST /invoices') {
			const body = await readJson(request);
			const eventId = String(body?.event_id ?? '');
			if (eventId.startsWith('slow-')) await new Promise((resolve) => setTimeout(resolve, SLOW_MS));
			if (eventId.startsWith('down-') && this.outage) {
				await this.onOutage?.();
				return send(503, { error: 'maintenance' });
			}
			const key = request.headers['idempotency-key'];
			let invoice = key ? this.byKey.get(key) : undefined;
			if (!invoice) {
				invoice = { id: `INV-${this.invoices.length + 1}`, ...body };
				this.invoices.push(invoice);
				if (key) this.byKey.set(key, invoice);
			}
			const calls = (this.callsByKey.get(key) ?? 0) + 1;
			this.callsByKey.set(key, calls);
			if (eventId.startsWith('flaky-') && calls <= FLAKY_FAILURES) {
				return send(500, { error: 'upstream timeout after the invoice was written' });
			}
			return send(201, invoice);
		}
		if (route === 'GET /invoices') return send(200, this.invoices);
		if (route === 'PUT /orders') {
			this.orders = await readJson(request);
			return send(200, this.orders);
		}
		if (route === 'GET /orders') return send(200, this.orders);
		if (route === 'POST /crm/orders') {
			const body = await readJson(request);
			this.upserts.push({ ...body, idempotency_key: request.headers['idempotency-key'] ?? null });
			return send(200, { id: `CRM-${body.id}`, ...body });
		}
		if (route === 'GET /crm/orders') return send(200, this.upserts);
		return send(404, { error: 'no such route' });
	}
}

module.exports = { Sink };
