'use strict';
/**
 * The key store's inbound gateway, as a provider and an operator see it, for the workflow
 * packages' end-to-end tests: a `stripe` source made with the CLI (`keystore source create`),
 * Stripe-signed deliveries to its ingest URL, the operator's view of the forwarding
 * (GET /v1/deliveries), and the Standard Webhooks signature of a forward, computed the way
 * the gateway signs it. Nothing here stands in for the service.
 *
 *   const gw = await Gateway.create(ks, { destination, destinationSecret });
 *   const answer = await gw.deliver(stripeEvent());   // {status, body}: 202, then 200 duplicate
 *   await gw.waitDelivered(eventId);                    // the forward answered 2xx
 */
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

// docs.stripe.com/webhooks: the endpoint's signing secret; the whole string keys the HMAC
const STRIPE_SECRET = `whsec_${crypto.randomBytes(24).toString('hex')}`;

/**
 * A destination secret whose decoded bytes are printable: `whsec_` + base64 of 32 hex
 * characters. Tools whose HMAC takes the key as text (n8n's Crypto node, Node-RED's
 * function node without Buffer) can then use `hex` as the key; 128 bits of entropy.
 */
function forwardSecret() {
	const hex = crypto.randomBytes(16).toString('hex');
	return { hex, whsec: `whsec_${Buffer.from(hex).toString('base64')}` };
}

/** Stripe's `Stripe-Signature` for `body` (a string) at unix time `t`. */
function stripeSignature(body, t = Math.floor(Date.now() / 1000), secret = STRIPE_SECRET) {
	const v1 = crypto.createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');
	return `t=${t},v1=${v1}`;
}

/** The Standard Webhooks `webhook-signature` the gateway puts on a forward. */
function forwardSignature(keyText, id, timestamp, body) {
	const mac = crypto.createHmac('sha256', Buffer.from(keyText)).update(`${id}.${timestamp}.${body}`);
	return `v1,${mac.digest('base64')}`;
}

/**
 * A Stripe event as Stripe sends it: pretty-printed JSON (so re-serialising it would not
 * reproduce the signed bytes) with non-ASCII text in it.
 */
function stripeEvent(name, type = 'payment_intent.succeeded') {
	const id = `evt_${name}_${crypto.randomBytes(6).toString('hex')}`;
	const event = {
		id,
		object: 'event',
		api_version: '2024-06-20',
		created: Math.floor(Date.now() / 1000),
		data: {
			object: {
				id: `pi_${crypto.randomBytes(6).toString('hex')}`,
				object: 'payment_intent',
				amount: 4200,
				amount_received: 4200,
				currency: 'eur',
				customer: 'cus_Zürich01',
				description: 'Café crème × 12 — order №5',
			},
		},
		livemode: false,
		pending_webhooks: 1,
		request: { id: null, idempotency_key: null },
		type,
	};
	return { id, event, body: JSON.stringify(event, null, 2) };
}

class Gateway {
	/**
	 * A `stripe` source named `name` in the key store's tenant, forwarding to `destination`
	 * (signed with `destinationSecret`, a whsec_ string, when given); or, with `destinations`
	 * (the API's list, as docs/webhooks/recipes.md routes one endpoint to two workflows), to
	 * each of those, through `keystore source create --destinations FILE`.
	 */
	static create(ks, { destination, destinationSecret, destinations, name = 'stripe', timeoutSeconds = 10, retryStatuses = [], deliveredHeader }) {
		const args = ['source', 'create', '--tenant', ks.tenant, '--name', name, '--provider', 'stripe',
			'--secret', STRIPE_SECRET, '--public-url', ks.url];
		if (destinations) {
			const file = path.join(ks.dir, `${name}-destinations.json`);
			fs.writeFileSync(file, JSON.stringify(destinations), { mode: 0o600 });
			args.push('--destinations', file);
			return new Gateway(ks, name, ks.cli(...args).split('\n').pop());
		}
		args.push('--destination', destination, '--timeout', String(timeoutSeconds));
		if (destinationSecret) args.push('--destination-secret', destinationSecret);
		for (const status of retryStatuses) args.push('--retry-status', String(status));
		if (deliveredHeader) args.push('--delivered-header', deliveredHeader);
		const ingestUrl = ks.cli(...args).split('\n').pop();
		return new Gateway(ks, name, ingestUrl);
	}

	constructor(ks, name, ingestUrl) {
		this.ks = ks;
		this.name = name;
		this.ingestUrl = ingestUrl;
	}

	/** One delivery of `body` by "Stripe", freshly signed as Stripe signs each attempt. */
	async deliver(body) {
		const send = () => fetch(this.ingestUrl, {
			method: 'POST',
			headers: { 'Content-Type': 'application/json; charset=utf-8', 'Stripe-Signature': stripeSignature(body) },
			body,
			signal: AbortSignal.timeout(60_000),
		});
		let response;
		try {
			response = await send();
		} catch (error) {
			// A kept-alive connection the server closed as fetch reused it (seen once under a
			// load average of 16): the request never got an answer, so send it again, as
			// Stripe resends whatever got no answer. Any other error is the test's failure.
			const code = error.cause?.code;
			if (!['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET'].includes(code)) throw error;
			response = await send();
		}
		return { status: response.status, body: await response.json(), replayed: response.headers.get('idempotent-replayed') };
	}

	/**
	 * The event's delivery as GET /v1/deliveries shows it to an operator: to `destination`
	 * (a name) when the source has several.
	 */
	async delivery(eventId, destination) {
		let query = `source=${encodeURIComponent(this.name)}&event_id=${encodeURIComponent(eventId)}`;
		if (destination) query += `&destination=${encodeURIComponent(destination)}`;
		const get = () => this.ks.api('GET', `/v1/deliveries?${query}`, undefined, this.ks.operatorToken);
		// A pooled connection the server closed while a synchronous CLI call (ks.cli) blocked the
		// event loop fails at once ("fetch failed"); a GET may simply be sent again.
		const [status, body] = await get().catch((error) => {
			if (error instanceof TypeError) return get();
			throw error;
		});
		if (status !== 200) throw new Error(`GET /v1/deliveries answered ${status}: ${JSON.stringify(body)}`);
		return body.deliveries[0];
	}

	/** Resolves with the delivery once it is `state`; rejects after timeoutMs with the last seen. */
	async waitState(eventId, state, timeoutMs, destination) {
		const deadline = Date.now() + timeoutMs;
		let last;
		while (Date.now() < deadline) {
			last = await this.delivery(eventId, destination);
			if (last?.state === state) return last;
			await new Promise((resolve) => setTimeout(resolve, 200));
		}
		throw new Error(`delivery of ${eventId} not ${state} after ${timeoutMs} ms: ${JSON.stringify(last)}`);
	}
}

module.exports = { Gateway, stripeEvent, stripeSignature, forwardSecret, forwardSignature, STRIPE_SECRET };
