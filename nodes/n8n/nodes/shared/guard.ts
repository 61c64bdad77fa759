/**
 * The Guard's claim of one item: one request, in which the key store itself waits for a
 * running attempt (`wait_seconds`), so a duplicate that arrives while the first is still
 * working leaves with the first one's result. Still running after the wait (or no free waiting
 * seat at the key store): the item is "try later", the Guard's error (docs/outcomes.md).
 */
import type { NodeApiError } from 'n8n-workflow';

import type { ClaimAnswer } from './contract';
import type { ClaimItem, ClaimOptions, Ctx } from './keystore';
import { claim } from './keystore';
import type { Output } from './routing';
import { decide } from './routing';
import { tagged, unexpected } from './transport';

export interface Guarded {
	answer: ClaimAnswer;
	output: Output;
	reason?: string;
}

/**
 * Claims one item, waiting up to `waitSeconds` (at most 30) on the key store for a running
 * attempt; `first` (an answer from a batch) is used instead when it needs no wait. Resolves
 * with the item's output; rejects with a NodeApiError tagged `in_progress` when the key is
 * still held by another attempt (try later), or with the request's own error.
 */
export async function guardOne(
	c: Ctx,
	scope: string,
	item: ClaimItem,
	options: ClaimOptions,
	waitSeconds: number,
	itemIndex: number,
	first?: ClaimAnswer,
): Promise<Guarded> {
	const waits = first === undefined || (first.outcome === 'in_progress' && waitSeconds >= 1);
	const answer = waits ? await claim(c, scope, item, options, itemIndex, waitSeconds) : first;
	const decision = decide(answer);
	if ('tryLater' in decision) throw stillRunning(c, answer, itemIndex);
	return { answer, output: decision.output, reason: decision.reason };
}

/** The Guard's error for a key another attempt still holds: 409 in_progress, try later. */
function stillRunning(c: Ctx, answer: ClaimAnswer, itemIndex: number): NodeApiError {
	const seconds = answer.retry_after_seconds;
	const error = unexpected(
		c.ctx,
		{
			status: 409,
			body: {
				error: {
					code: 'in_progress',
					message: `another execution is still working on ${answer.record.scope} / ${answer.record.key}${
						seconds === undefined ? '' : ` (its lease ends in ${seconds} s)`
					}; nothing was claimed: try later`,
					details: {},
				},
			},
			headers: {},
		},
		itemIndex,
	);
	return tagged(error, 'in_progress');
}
