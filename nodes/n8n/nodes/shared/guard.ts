/**
 * The Guard: claim, and when another attempt is running, wait for it on the server
 * (GET /v1/keys?wait=, no timer in n8n) and claim again, so a duplicate that arrives while the
 * first is still working leaves with the first one's result instead of an error.
 */
import type { ClaimAnswer } from './contract';
import type { ClaimItem, ClaimOptions, Ctx } from './keystore';
import { claim, lookup } from './keystore';
import type { Output } from './routing';
import { NEEDS_ATTENTION, decide } from './routing';

/** Claims per item at most; each round waits on the server or sees a changed state. */
const MAX_ROUNDS = 20;

export interface Guarded {
	answer: ClaimAnswer;
	output: Output;
	reason?: string;
}

/** The route of an answer whose wait is over (no more waiting allowed). */
export function settle(answer: ClaimAnswer): Guarded {
	const decision = decide(answer, false);
	if ('wait' in decision) return { answer, output: NEEDS_ATTENTION, reason: 'in_progress' };
	return { answer, output: decision.output, reason: decision.reason };
}

/**
 * Keeps claiming one item until it is New, Already Done or Needs Attention. A running attempt
 * is waited for until `waitSeconds` have passed since the start; an answer of `first` (from a
 * batch) is used instead of the first claim.
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
	const deadline = Date.now() + waitSeconds * 1000;
	let answer = first ?? (await claim(c, scope, item, options, itemIndex));
	for (let round = 1; round < MAX_ROUNDS; round++) {
		const left = (deadline - Date.now()) / 1000;
		const decision = decide(answer, left >= 1);
		if (!('wait' in decision)) return { answer, output: decision.output, reason: decision.reason };
		await lookup(c, scope, item.key, Math.floor(left), itemIndex);
		answer = await claim(c, scope, item, options, itemIndex);
	}
	return settle(answer);
}
