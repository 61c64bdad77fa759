/**
 * The key store's wire contract (v1.1), as the nodes see it: the record, the outcomes of a
 * claim, and the one pure function that turns an HTTP answer into a typed claim result.
 * No n8n imports here, so the unit tests exercise it directly.
 */

export type State = 'in_progress' | 'succeeded' | 'failed' | 'released' | 'needs_reconciliation';

export type Outcome =
	| 'acquired'
	| 'replay'
	| 'in_progress'
	| 'needs_reconciliation'
	| 'fingerprint_mismatch';

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

export interface StoredResult {
	resource_id?: string | null;
	status_code?: number | null;
	body?: JsonValue;
}

export interface KeyRecord {
	scope: string;
	key: string;
	state: State;
	fingerprint: string | null;
	version: number | string | null;
	attempt: number;
	first_seen_at: string;
	last_seen_at: string;
	expires_at: string;
	lease_expires_at: string | null;
	duplicate_count: number;
	checkpoint: { step: string | null; resource_id: string | null; at: string } | null;
	result: StoredResult | null;
	review: JsonObject | null;
}

export interface ErrorBody {
	code: string;
	message: string;
	details: JsonObject;
}

/** What one claim (single or one item of a batch) answered. */
export interface ClaimAnswer {
	outcome: Outcome;
	record: KeyRecord;
	lease_token?: string;
	attempt?: number;
	/** `acquired` again: this claim's own attempt, whose first answer was lost (v1.1). */
	resumed?: boolean;
	error?: ErrorBody;
	/** Seconds until the holder's lease runs out, for `in_progress`. */
	retry_after_seconds?: number;
}

/** An HTTP answer, reduced to what docs/api.md needs. */
export interface Answer {
	status: number;
	body: unknown;
	headers: Record<string, unknown>;
}

const OUTCOMES: readonly string[] = [
	'acquired',
	'replay',
	'in_progress',
	'needs_reconciliation',
	'fingerprint_mismatch',
];

function isObject(value: unknown): value is Record<string, unknown> {
	return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** docs/api.md's error object of a body, or undefined when the body has none. */
export function errorOf(body: unknown): ErrorBody | undefined {
	if (!isObject(body) || !isObject(body.error)) return undefined;
	const { code, message, details } = body.error;
	if (typeof code !== 'string') return undefined;
	return {
		code,
		message: typeof message === 'string' ? message : code,
		details: isObject(details) ? (details as JsonObject) : {},
	};
}

/**
 * A claim result from a claim's response body (single claim, or one entry of a batch's
 * `results`). Returns undefined when the body is not a claim answer (a 400, 401, 503...): the
 * caller then treats it as an error of the request, not as an outcome.
 */
export function claimAnswerOf(body: unknown, headers: Record<string, unknown> = {}): ClaimAnswer | undefined {
	if (!isObject(body) || typeof body.outcome !== 'string' || !OUTCOMES.includes(body.outcome)) {
		return undefined;
	}
	if (!isObject(body.record)) return undefined;
	const answer: ClaimAnswer = {
		outcome: body.outcome as Outcome,
		record: body.record as unknown as KeyRecord,
	};
	if (typeof body.lease_token === 'string') answer.lease_token = body.lease_token;
	if (typeof body.attempt === 'number') answer.attempt = body.attempt;
	if (body.resumed === true) answer.resumed = true;
	const error = errorOf(body);
	if (error) answer.error = error;
	const retryAfter = retryAfterOf(error, headers);
	if (answer.outcome === 'in_progress' && retryAfter !== undefined) {
		answer.retry_after_seconds = retryAfter;
	}
	if (answer.outcome === 'acquired' && answer.lease_token === undefined) return undefined;
	return answer;
}

function retryAfterOf(error: ErrorBody | undefined, headers: Record<string, unknown>): number | undefined {
	const fromDetails = error?.details.retry_after_seconds;
	if (typeof fromDetails === 'number') return fromDetails;
	const header = headers['retry-after'] ?? headers['Retry-After'];
	const seconds = Number(header);
	return header !== undefined && Number.isFinite(seconds) ? seconds : undefined;
}

/** The `record` of a record response (complete, release, extend, lookup, expire). */
export function recordOf(body: unknown): KeyRecord | undefined {
	return isObject(body) && isObject(body.record) ? (body.record as unknown as KeyRecord) : undefined;
}

export const MAX_WAIT_PER_LOOKUP = 30; // docs/api.md's limit on GET /v1/keys?wait=
export const MAX_CLAIM_WAIT = 30; // docs/api.md's limit on a claim's wait_seconds
export const MAX_BATCH_ITEMS = 1000; // docs/api.md's limit on POST /v1/claim/batch

/** The outcomes of POST /v1/send that come with a record (docs/api.md "Outbound"). */
export type SendOutcome = 'sent' | 'failed' | 'accepted' | 'replay';

/** What one send answered: the API's answer as `result` (none while `accepted`). */
export interface SendAnswer {
	outcome: SendOutcome;
	record: KeyRecord;
	result: StoredResult | null;
}

const SEND_ANSWERS: Record<number, readonly string[]> = {
	201: ['sent'],
	200: ['failed', 'replay'],
	202: ['accepted'],
};

/**
 * A send's answer from its HTTP status and body: 201 sent, 200 failed or replay, 202 accepted.
 * Undefined for anything else (409 in_progress, 422 fingerprint_mismatch, 404 not_found...):
 * the caller turns that into an error with the key store's code.
 */
export function sendAnswerOf(status: number, body: unknown): SendAnswer | undefined {
	if (!isObject(body) || typeof body.outcome !== 'string' || !isObject(body.record)) return undefined;
	if (!(SEND_ANSWERS[status] ?? []).includes(body.outcome)) return undefined;
	const record = body.record as unknown as KeyRecord;
	const result = isObject(body.result) ? (body.result as StoredResult) : (record.result ?? null);
	return { outcome: body.outcome as SendOutcome, record, result: body.outcome === 'accepted' ? null : result };
}

/**
 * Whether a send's answer means the destination refused for good: `failed` now, or a `replay`
 * of a send that failed (the repeat gets the first answer, so it ends the same way).
 */
export function sendRefused(answer: SendAnswer): boolean {
	return answer.outcome === 'failed' || (answer.outcome === 'replay' && answer.record.state === 'failed');
}

export const MAX_SEND_WAIT = 30; // docs/api.md's limit on a send's wait_seconds
export const SEND_METHODS = ['POST', 'PUT', 'PATCH', 'DELETE'] as const;
