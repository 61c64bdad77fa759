/**
 * Claim Batch: all input items in one POST /v1/claim/batch (chunks of 1,000, grouped by
 * scope). Each item gets its own outcome, as if claimed one by one in input order.
 */
import type { INodeExecutionData, INodeProperties } from 'n8n-workflow';

import type { JsonObject } from '../../shared/contract';
import { MAX_BATCH_ITEMS } from '../../shared/contract';
import type { ClaimItem } from '../../shared/keystore';
import { claimBatch } from '../../shared/keystore';
import { claimOptions, payloadProperties, readClaim, readClaimOptions } from '../../shared/properties';
import { claimInfo } from '../../shared/routing';
import type { Ctx } from './common';

const show = { operation: ['claimBatch'] };

export const description: INodeProperties[] = [...payloadProperties(show), claimOptions(show)];

/** The answer of every item, in input order: a claim's info, or `{refused: error}`. */
export async function executeAll(c: Ctx, items: INodeExecutionData[]): Promise<JsonObject[]> {
	const answers: JsonObject[] = new Array(items.length);
	const groups = new Map<string, Array<{ index: number; item: ClaimItem }>>();
	for (let index = 0; index < items.length; index++) {
		const { scope, item } = readClaim(c.ctx, index);
		const group = groups.get(scope) ?? [];
		group.push({ index, item });
		groups.set(scope, group);
	}
	const options = readClaimOptions(c.ctx, 0);
	for (const [scope, group] of groups) {
		for (let start = 0; start < group.length; start += MAX_BATCH_ITEMS) {
			const chunk = group.slice(start, start + MAX_BATCH_ITEMS);
			const entries = await claimBatch(c, scope, chunk.map((entry) => entry.item), options);
			chunk.forEach(({ index, item }, i) => {
				const entry = entries[i];
				answers[index] =
					'answer' in entry
						? (claimInfo(scope, item.key, entry.answer) as unknown as JsonObject)
						: { scope, key: item.key, outcome: 'refused', error: entry.refused as unknown as JsonObject };
			});
		}
	}
	return answers;
}
