/**
 * The key store's operations as functions of an n8n execution context: each sends one request
 * (the Guard's wait adds lookups) and returns the contract's answer, or throws a NodeApiError
 * for an answer outside what the operation expects.
 */
import type { IDataObject, IExecuteFunctions } from 'n8n-workflow';

import type { Answer, ClaimAnswer, ErrorBody, JsonValue, KeyRecord } from './contract';
import { MAX_BATCH_ITEMS, MAX_WAIT_PER_LOOKUP, claimAnswerOf, errorOf, recordOf } from './contract';
import type { FingerprintPart } from './fingerprint';
import { call, unexpected } from './transport';

export interface ClaimOptions {
	ttl_seconds?: number;
	lease_seconds?: number;
	on_stale?: 'reconcile' | 'retry';
}

export interface ClaimItem extends FingerprintPart {
	key: string;
	version?: number | string;
}

export interface Ctx {
	ctx: IExecuteFunctions;
	url: string;
}

function claimBody(scope: string, item: ClaimItem, options: ClaimOptions): IDataObject {
	const body: IDataObject = { scope, key: item.key, ...options };
	if (item.payload !== undefined) body.payload = item.payload as IDataObject;
	if (item.fingerprint !== undefined) body.fingerprint = item.fingerprint;
	if (item.version !== undefined) body.version = item.version;
	return body;
}

/** POST /v1/claim: any of the five outcomes; other answers (400, 401, 503...) throw. */
export async function claim(
	{ ctx, url }: Ctx,
	scope: string,
	item: ClaimItem,
	options: ClaimOptions,
	itemIndex: number,
): Promise<ClaimAnswer> {
	const answer = await call(ctx, url, 'POST', '/v1/claim', {
		body: claimBody(scope, item, options),
		itemIndex,
	});
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
	const answer = await call(ctx, url, 'POST', '/v1/claim/batch', { body });
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
