/** Release: give the attempt back after a transient failure; the next claim may try again. */
import type { IDataObject, INodeProperties } from 'n8n-workflow';

import type { JsonObject } from '../../shared/contract';
import { recordCall } from '../../shared/keystore';
import type { Ctx } from './common';
import { leaseTokenProperty, readLease, recordInfo } from './common';

export const description: INodeProperties[] = [
	leaseTokenProperty('release'),
	{
		displayName: 'Reason',
		name: 'reason',
		type: 'string',
		default: '={{ $json.error?.message ?? "" }}',
		description: 'Kept in the attempt history (at most 512 characters); never a secret',
		displayOptions: { show: { operation: ['release'] } },
	},
];

export async function execute(c: Ctx, index: number): Promise<JsonObject> {
	const lease = readLease(c.ctx, index);
	const body: IDataObject = { ...lease };
	const reason = String(c.ctx.getNodeParameter('reason', index, '') ?? '').slice(0, 512);
	if (reason !== '') body.reason = reason;
	const record = await recordCall(c, '/v1/release', body, index);
	return recordInfo(lease.scope, lease.key, record);
}
