/**
 * The one place that talks HTTP to the key store. Every call goes through n8n's
 * httpRequestWithAuthentication (the credential adds the bearer token) with status errors
 * ignored, so the caller sees docs/api.md's own answer (201, 409 in_progress, 422...) and
 * decides; anything outside docs/api.md becomes a NodeApiError with the server's `code`.
 */
import type { IDataObject, IExecuteFunctions, IHttpRequestMethods, JsonObject as N8nJson } from 'n8n-workflow';
import { NodeApiError, NodeOperationError } from 'n8n-workflow';

import type { Answer } from './contract';
import { errorOf } from './contract';

export const CREDENTIAL_NAME = 'idempotencyKeyStoreApi';

const BASE_TIMEOUT_MS = 30_000; // a claim is one short transaction; 30 s means the store is down

/** The service URL of the credential, without a trailing slash. */
export async function baseUrl(ctx: IExecuteFunctions): Promise<string> {
	const credentials = await ctx.getCredentials(CREDENTIAL_NAME);
	return String(credentials.url ?? '').replace(/\/+$/, '');
}

/**
 * One request to the key store; resolves with any HTTP status (the caller interprets it) and
 * rejects only when no HTTP answer came (connection refused, timeout).
 * `waitSeconds` lengthens the timeout for a server-side wait (a claim's `wait_seconds`, a
 * lookup's `wait`).
 */
export async function call(
	ctx: IExecuteFunctions,
	url: string,
	method: IHttpRequestMethods,
	path: string,
	options: { body?: IDataObject; qs?: IDataObject; waitSeconds?: number; itemIndex?: number } = {},
): Promise<Answer> {
	try {
		const response = (await ctx.helpers.httpRequestWithAuthentication.call(ctx, CREDENTIAL_NAME, {
			method,
			url: `${url}${path}`,
			body: options.body,
			qs: options.qs,
			json: true,
			returnFullResponse: true,
			ignoreHttpStatusErrors: true,
			timeout: BASE_TIMEOUT_MS + (options.waitSeconds ?? 0) * 1000,
		})) as { statusCode: number; body: unknown; headers: Record<string, unknown> };
		return { status: response.statusCode, body: response.body, headers: response.headers ?? {} };
	} catch (error) {
		const failed = new NodeApiError(ctx.getNode(), error as N8nJson, {
			message: `The key store at ${url} did not answer`,
			description: `${(error as Error).message}. Nothing was claimed or changed.`,
			itemIndex: options.itemIndex,
		});
		throw tagged(failed, 'unreachable');
	}
}

/**
 * Marks an error with the key store's code for it (`unreachable` when no answer came,
 * `invalid_item` for an item the node cannot send): the Guard decides from it whether the
 * sender should try again (see failure.ts).
 */
export function tagged<E extends NodeApiError | NodeOperationError>(error: E, code: string): E {
	error.context.keystoreCode = code;
	return error;
}

/**
 * The error for an answer the caller did not expect: docs/api.md's code and message, with the
 * HTTP status, so "lease_lost" or "unauthorized" shows as such in the n8n UI.
 */
export function unexpected(ctx: IExecuteFunctions, answer: Answer, itemIndex?: number): NodeApiError {
	const error = errorOf(answer.body);
	const code = error?.code ?? `http_${answer.status}`;
	const message = error?.message ?? `The key store answered HTTP ${answer.status}`;
	const failed = new NodeApiError(
		ctx.getNode(),
		{ code, message, httpCode: String(answer.status) } as N8nJson,
		{
			message: `${code}: ${message}`,
			description: hint(code),
			httpCode: String(answer.status),
			itemIndex,
		},
	);
	return tagged(failed, code);
}

const HINTS: Record<string, string> = {
	unauthorized: 'Check the token in the Idempotency Key Store credential.',
	forbidden: 'This needs a token with the operator role.',
	lease_lost:
		'A newer attempt or a person replaced this lease: the outcome is theirs to record. Do not repeat the side effect.',
	already_completed: 'The record is already finished with a different state or result.',
	invalid_request: 'The key store refused the request as malformed; the details say which field.',
	unavailable: 'The key store cannot reach its database; nothing was written. Retry later.',
	rate_limited: 'Too many requests for this token; retry after a pause.',
	in_progress:
		'Another execution still holds this key (after the wait). Nothing was claimed: answer a webhook sender 503 so that it sends again; its next delivery gets the result. See docs/outcomes.md.',
	fingerprint_mismatch:
		'This key was used before with other data: nothing was done. A person decides in the key store\'s review queue; a real change needs a new key.',
	needs_reconciliation:
		'An earlier attempt ended without saying whether it did the work: nothing was done. A person decides in the key store\'s review queue.',
	not_found: 'No such connection (or record) for this token\'s tenant: check the name in the key store (keystore connection list).',
	send_failed:
		'The API refused the request for good (a 4xx): the key store stored its answer, and every repeat of this key gets it back. Fix the request and use a new key.',
};

function hint(code: string): string | undefined {
	return HINTS[code];
}

/** An error as n8n shows it best: n8n's own errors as they are, anything else wrapped. */
export function asNodeError(
	ctx: IExecuteFunctions,
	error: unknown,
	itemIndex?: number,
): NodeApiError | NodeOperationError {
	if (error instanceof NodeApiError || error instanceof NodeOperationError) return error;
	return new NodeOperationError(ctx.getNode(), error as Error, { itemIndex });
}
