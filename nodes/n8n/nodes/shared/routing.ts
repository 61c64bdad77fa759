/**
 * The Guard's decision, as data: which of the three outputs a claim answer goes to, and what
 * the item carries there. Pure; the unit tests check every row against docs/outcomes.md.
 *
 *   acquired                  -> New             (lease_token on the item: go and do it)
 *   replay                    -> Already Done    (the stored result of the first attempt)
 *   fingerprint_mismatch      -> Needs Attention (same key, different payload: refused)
 *   needs_reconciliation      -> Needs Attention (an earlier attempt's outcome is unknown)
 *   in_progress               -> try later: the Guard's error, like a key store that does
 *                                not answer (still running after the wait the claim asked
 *                                the key store for; nothing claimed, and no person needed)
 */
import type { ClaimAnswer, ErrorBody, JsonObject, KeyRecord, StoredResult } from './contract';

export const NEW = 0;
export const ALREADY_DONE = 1;
export const NEEDS_ATTENTION = 2;
export type Output = typeof NEW | typeof ALREADY_DONE | typeof NEEDS_ATTENTION;

export type Decision = { output: Output; reason?: string } | { tryLater: string };

/** Where an answer goes; `{tryLater: code}` for an answer that is the Guard's error. */
export function decide(answer: ClaimAnswer): Decision {
	switch (answer.outcome) {
		case 'acquired':
			return { output: NEW };
		case 'replay':
			return { output: ALREADY_DONE };
		case 'in_progress':
			return { tryLater: 'in_progress' };
		case 'fingerprint_mismatch':
		case 'needs_reconciliation':
			return { output: NEEDS_ATTENTION, reason: answer.outcome };
	}
	return { output: NEEDS_ATTENTION, reason: String(answer.outcome) };
}

/** A claim's answer as an item carries it (the Claim operation's output). */
export interface ClaimInfo {
	scope: string;
	key: string;
	outcome: string;
	lease_token?: string;
	attempt?: number;
	resumed?: boolean;
	result: StoredResult | null;
	state: KeyRecord['state'] | null;
	record: KeyRecord | null;
	error?: ErrorBody;
}

/** What the Guard puts on an item (under the output field, `idempotency` by default). */
export interface GuardInfo extends ClaimInfo {
	route: 'new' | 'already_done' | 'needs_attention';
	reason: string | null;
}

const ROUTE_NAMES = ['new', 'already_done', 'needs_attention'] as const;

export function claimInfo(scope: string, key: string, answer: ClaimAnswer): ClaimInfo {
	const info: ClaimInfo = {
		scope,
		key,
		outcome: answer.outcome,
		result: answer.record.result ?? null,
		state: answer.record.state ?? null,
		record: answer.record,
	};
	if (answer.lease_token !== undefined) info.lease_token = answer.lease_token;
	if (answer.attempt !== undefined) info.attempt = answer.attempt;
	if (answer.resumed) info.resumed = true;
	if (answer.error !== undefined) info.error = answer.error;
	return info;
}

export function guardInfo(
	scope: string,
	key: string,
	answer: ClaimAnswer,
	output: Output,
	reason?: string,
): GuardInfo {
	return { route: ROUTE_NAMES[output], reason: reason ?? null, ...claimInfo(scope, key, answer) };
}

/** Needs Attention for an item the key store refused as a request (no claim outcome). */
export function refusedInfo(scope: string, key: string, error: ErrorBody): GuardInfo {
	return {
		route: 'needs_attention',
		reason: error.code,
		scope,
		key,
		outcome: 'refused',
		result: null,
		state: null,
		record: null,
		error,
	};
}

/** The item's JSON with the guard info under `field`; the item's own data stays as it was. */
export function withInfo(json: JsonObject, field: string, info: object): JsonObject {
	return { ...json, [field]: info as JsonObject };
}
