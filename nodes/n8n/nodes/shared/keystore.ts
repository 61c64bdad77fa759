/**
 * The key store's operations as functions of an n8n execution context: each sends one request
 * and returns docs/api.md's answer, or throws a NodeApiError for an answer outside what the
 * operation expects. Claims propose a lease token of their own (one per item, made once), so
 * a claim that got no answer is sent once more at once and, if the lost one had acquired the
 * key, resumes that attempt (contract v1.1) instead of meeting it as `in_progress`.
 */
import { randomBytes } from 'node:crypto';

import type { IDataObject, IExecuteFunctions, JsonObject as N8nJson } from 'n8n-workflow';
import { NodeApiError } from 'n8n-workflow';

import type { Answer, ClaimAnswer, ErrorBody, JsonValue, KeyRecord, SendAnswer } from './contract';
import {
	MAX_BATCH_ITEMS,
	MAX_CLAIM_WAIT,
	MAX_SEND_WAIT,
	MAX_WAIT_PER_LOOKUP,
	claimAnswerOf,
	errorOf,
	recordOf,
	sendAnswerOf,
} from './contract';
import type { FingerprintPart } from './fingerprint';
import { asNodeError, call, tagged, unexpected } from './transport';

// 24 random bytes are 32 base64url characters, 192 bits: over docs/api.md's floor of 128
// random bits for a proposed lease token (`lt_` + 22-64 of A-Z a-z 0-9 _ -).
const LEASE_TOKEN_BYTES = 24;

/** A new lease token to propose, from Node's cryptographic random source. */
export function newLeaseToken(): string {
	return `lt_${randomBytes(LEASE_TOKEN_BYTES).toString('base64url')}`;
}

export interface ClaimOptions {
	ttl_seconds?: number;
	lease_seconds?: number;
	on_stale?: 'reconcile' | 'retry';
}

export interface ClaimItem extends FingerprintPart {
	key: string;
	version?: number | string;
	/** the token this item's claims propose; made on its first claim and kept on the item */
	lease_token?: string;
}

export interface Ctx {
	ctx: IExecuteFunctions;
	url: string;
}

/** The claim's body; gives the item its lease token on its first claim. */
function claimBody(scope: string, item: ClaimItem, options: ClaimOptions): IDataObject {
	item.lease_token ??= newLeaseToken();
	const body: IDataObject = { scope, key: item.key, ...options, lease_token: item.lease_token };
	if (item.payload !== undefined) body.payload = item.payload as IDataObject;
	if (item.fingerprint !== undefined) body.fingerprint = item.fingerprint;
	if (item.version !== undefined) body.version = item.version;
	return body;
}

/**
 * A claim request, sent once more at once when no answer came (a dropped connection, a
 * timeout, a key store worker killed after its commit): the body, with its proposed lease
 * token, is the same, so the repeat resumes what the lost one acquired. A second failure is
 * thrown as it is (`unreachable`: try later).
 */
async function claimCall(ctx: IExecuteFunctions, send: () => Promise<Answer>): Promise<Answer> {
	try {
		return await send();
	} catch (error) {
		const code = (error as { context?: IDataObject }).context?.keystoreCode;
		if (code !== 'unreachable') throw asNodeError(ctx, error);
		return await send();
	}
}

/**
 * POST /v1/claim: any of the five outcomes; other answers (400, 401, 503...) throw. With
 * `waitSeconds` (1 to 30; more counts as 30), the key store waits while another attempt's live
 * lease holds the record and answers by what that attempt did (`wait_seconds`): one request.
 */
export async function claim(
	{ ctx, url }: Ctx,
	scope: string,
	item: ClaimItem,
	options: ClaimOptions,
	itemIndex: number,
	waitSeconds = 0,
): Promise<ClaimAnswer> {
	// an expression may give anything: whole seconds 0-30, and no wait for what is not a number
	const wait = Number.isFinite(waitSeconds) ? Math.min(Math.max(Math.floor(waitSeconds), 0), MAX_CLAIM_WAIT) : 0;
	const body = claimBody(scope, item, options);
	if (wait > 0) body.wait_seconds = wait;
	const answer = await claimCall(ctx, () =>
		call(ctx, url, 'POST', '/v1/claim', { body, itemIndex, waitSeconds: wait }),
	);
	const claimed = claimAnswerOf(answer.body, answer.headers);
	if (!claimed) throw unexpected(ctx, answer, itemIndex);
	return claimed;
}

/** One entry of a batch: a claim outcome, or the error that refused this item alone. */
export type BatchEntry = { answer: ClaimAnswer } | { refused: ErrorBody };

/**
 * POST /v1/claim/batch for up to 1,000 items, one transaction; entries in request order.
 * A request refused whole (400, 401...) throws.
 */
export async function claimBatch(
	{ ctx, url }: Ctx,
	scope: string,
	items: ClaimItem[],
	options: ClaimOptions,
): Promise<BatchEntry[]> {
	const body: IDataObject = {
		scope,
		items: items.map((item) => {
			const entry = claimBody(scope, item, {});
			delete entry.scope;
			return entry;
		}),
		...options,
	};
	const answer = await claimCall(ctx, () => call(ctx, url, 'POST', '/v1/claim/batch', { body }));
	const results = (answer.body as { results?: unknown })?.results;
	if (answer.status !== 200 || !Array.isArray(results) || results.length !== items.length) {
		throw unexpected(ctx, answer);
	}
	return results.map((result: unknown) => batchEntryOf(result));
}

/** One input item's claim: its index, scope, and what is claimed. */
export interface IndexedClaim {
	index: number;
	scope: string;
	item: ClaimItem;
}

/**
 * Claims everything through the batch endpoint: grouped by scope (a batch has one), in chunks
 * of at most 1,000, each chunk one transaction on the server; `onChunk` sees each chunk's
 * entries before the next chunk is sent.
 */
export async function claimInBatches(
	c: Ctx,
	claims: IndexedClaim[],
	options: ClaimOptions,
	onChunk: (chunk: IndexedClaim[], entries: BatchEntry[]) => Promise<void>,
): Promise<void> {
	const groups = new Map<string, IndexedClaim[]>();
	for (const claim of claims) {
		const group = groups.get(claim.scope) ?? [];
		group.push(claim);
		groups.set(claim.scope, group);
	}
	for (const [scope, group] of groups) {
		for (let start = 0; start < group.length; start += MAX_BATCH_ITEMS) {
			const chunk = group.slice(start, start + MAX_BATCH_ITEMS);
			await onChunk(chunk, await claimBatch(c, scope, chunk.map((claim) => claim.item), options));
		}
	}
}

/** One batch result as an entry; exported for the unit tests. */
export function batchEntryOf(result: unknown): BatchEntry {
	const answer = claimAnswerOf(result);
	if (answer) return { answer };
	return {
		refused: errorOf(result) ?? {
			code: 'invalid_response',
			message: 'The key store answered this item with something that is not a claim result',
			details: {},
		},
	};
}

/** GET /v1/keys: the record, or undefined for 404 not_found / expired. */
export async function lookup(
	{ ctx, url }: Ctx,
	scope: string,
	key: string,
	waitSeconds: number,
	itemIndex: number,
): Promise<{ record?: KeyRecord; code?: string }> {
	const wait = Math.min(Math.max(Math.ceil(waitSeconds), 0), MAX_WAIT_PER_LOOKUP);
	const qs: IDataObject = { scope, key };
	if (wait > 0) qs.wait = wait;
	const answer = await call(ctx, url, 'GET', '/v1/keys', { qs, waitSeconds: wait, itemIndex });
	if (answer.status === 404) {
		const error = errorOf(answer.body);
		if (error && (error.code === 'not_found' || error.code === 'expired')) return { code: error.code };
	}
	const record = answer.status === 200 ? recordOf(answer.body) : undefined;
	if (!record) throw unexpected(ctx, answer, itemIndex);
	return { record };
}

/** A call about one record that answers 200 with the record (complete, release, ...). */
export async function recordCall(
	{ ctx, url }: Ctx,
	path: '/v1/complete' | '/v1/release' | '/v1/extend' | '/v1/expire',
	body: IDataObject,
	itemIndex: number,
): Promise<KeyRecord> {
	const answer: Answer = await call(ctx, url, 'POST', path, { body, itemIndex });
	const record = answer.status === 200 ? recordOf(answer.body) : undefined;
	if (!record) throw unexpected(ctx, answer, itemIndex);
	return record;
}

export interface ResultIn {
	resource_id?: string;
	status_code?: number;
	body?: JsonValue;
}

/** The body of POST /v1/send, as docs/api.md "Outbound" has it. */
export interface SendRequest extends FingerprintPart {
	scope: string;
	key: string;
	connection: string;
	request: IDataObject;
	resource_id_pointer?: string;
	wait_seconds: number;
}

/**
 * POST /v1/send: the key store makes the request to the connection's API at most once per
 * (scope, key) and answers sent, failed, accepted or replay; any other answer (409
 * in_progress, 422 fingerprint_mismatch, 404 for an unknown connection, 400...) throws with
 * the key store's code. A request that got no answer is not sent again here: the send may be
 * queued, and the item's next run (same key) gets what the first one did.
 */
export async function send({ ctx, url }: Ctx, body: SendRequest, itemIndex: number): Promise<SendAnswer> {
	const wait = Number.isFinite(body.wait_seconds)
		? Math.min(Math.max(Math.ceil(body.wait_seconds), 0), MAX_SEND_WAIT)
		: 0;
	let answer: Answer;
	try {
		answer = await call(ctx, url, 'POST', '/v1/send', {
			body: { ...body, wait_seconds: wait } as unknown as IDataObject,
			itemIndex,
			waitSeconds: wait,
		});
	} catch (error) {
		const lost = new NodeApiError(ctx.getNode(), error as N8nJson, {
			message: `The key store at ${url} did not answer the send`,
			description:
				'The request may or may not be queued. Run the item again with the same key: the key store makes the request at most once, and the repeat gets its answer.',
			itemIndex,
		});
		throw tagged(lost, 'unreachable');
	}
	const sent = sendAnswerOf(answer.status, answer.body);
	if (!sent) throw unexpected(ctx, answer, itemIndex);
	return sent;
}
