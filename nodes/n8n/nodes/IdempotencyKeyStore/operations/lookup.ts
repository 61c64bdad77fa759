/** Lookup: GET /v1/keys, optionally waiting on the server for a running attempt to finish. */
import type { INodeProperties } from 'n8n-workflow';

import type { JsonObject } from '../../shared/contract';
import { lookup } from '../../shared/keystore';
import type { Ctx } from './common';
import { readScopeAndKey } from './common';

export const description: INodeProperties[] = [
	{
		displayName: 'Wait While In Progress (Seconds)',
		name: 'wait',
		type: 'number',
		typeOptions: { minValue: 0, maxValue: 30 },
		default: 0,
		description:
			'If the record is in progress, the key store answers when its state changes or after this many seconds (at most 30). 0 answers at once.',
		displayOptions: { show: { operation: ['lookup'] } },
	},
];

export async function execute(c: Ctx, index: number): Promise<JsonObject> {
	const { scope, key } = readScopeAndKey(c.ctx, index);
	const wait = Number(c.ctx.getNodeParameter('wait', index, 0));
	const found = await lookup(c, scope, key, wait, index);
	if (!found.record) return { scope, key, found: false, state: null, record: null, code: found.code ?? null };
	return { scope, key, found: true, state: found.record.state, record: found.record as unknown as JsonObject };
}
