/**
 * Claim Batch: all input items in one POST /v1/claim/batch (chunks of 1,000, grouped by
 * scope). Each item gets its own outcome, as if claimed one by one in input order.
 */
import type { INodeExecutionData, INodeProperties } from 'n8n-workflow';

import type { JsonObject } from '../../shared/contract';
import type { IndexedClaim } from '../../shared/keystore';
import { claimInBatches } from '../../shared/keystore';
import { claimOptions, payloadProperties, readClaim, readClaimOptions } from '../../shared/properties';
import { claimInfo } from '../../shared/routing';
import type { Ctx } from './common';

const show = { operation: ['claimBatch'] };

export const description: INodeProperties[] = [...payloadProperties(show), claimOptions(show)];

/** The answer of every item, in input order: a claim's info, or `{outcome: 'refused', error}`. */
export async function executeAll(c: Ctx, items: INodeExecutionData[]): Promise<JsonObject[]> {
	const claims: IndexedClaim[] = items.map((_, index) => ({ index, ...readClaim(c.ctx, index) }));
	const answers: JsonObject[] = new Array(items.length);
	await claimInBatches(c, claims, readClaimOptions(c.ctx, 0), async (chunk, entries) => {
		chunk.forEach(({ index, scope, item }, i) => {
			const entry = entries[i];
			answers[index] =
				'answer' in entry
					? (claimInfo(scope, item.key, entry.answer) as unknown as JsonObject)
					: { scope, key: item.key, outcome: 'refused', error: entry.refused as unknown as JsonObject };
		});
	});
	return answers;
}
