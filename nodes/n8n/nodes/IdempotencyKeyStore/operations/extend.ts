/** Extend: a heartbeat for long work, with an optional checkpoint of how far it got. */
import type { IDataObject, INodeProperties } from 'n8n-workflow';

import type { JsonObject } from '../../shared/contract';
import { recordCall } from '../../shared/keystore';
import type { Ctx } from './common';
import { leaseTokenProperty, readLease, recordInfo } from './common';

const show = { operation: ['extend'] };

export const description: INodeProperties[] = [
	leaseTokenProperty('extend'),
	{
		displayName: 'Lease (Seconds)',
		name: 'leaseSeconds',
		type: 'number',
		typeOptions: { minValue: 1, maxValue: 86400 },
		default: 300,
		description: 'The lease runs this long from now',
		displayOptions: { show },
	},
	{
		displayName: 'Checkpoint',
		name: 'checkpoint',
		type: 'string',
		default: '',
		placeholder: 'invoice_created',
		description: 'Optional step name (1-128 characters), shown to whoever resolves an unfinished attempt',
		displayOptions: { show },
	},
	{
		displayName: 'Checkpoint Resource ID',
		name: 'checkpointResourceId',
		type: 'string',
		default: '',
		placeholder: 'INV-42',
		description: 'Optional ID of what was already created (e.g. INV-42)',
		displayOptions: { show },
	},
];

export async function execute(c: Ctx, index: number): Promise<JsonObject> {
	const { ctx } = c;
	const lease = readLease(ctx, index);
	const body: IDataObject = { ...lease, lease_seconds: Number(ctx.getNodeParameter('leaseSeconds', index)) };
	const checkpoint = String(ctx.getNodeParameter('checkpoint', index, '') ?? '');
	if (checkpoint !== '') body.checkpoint = checkpoint;
	const resourceId = String(ctx.getNodeParameter('checkpointResourceId', index, '') ?? '');
	if (resourceId !== '') body.resource_id = resourceId;
	const record = await recordCall(c, '/v1/extend', body, index);
	return recordInfo(lease.scope, lease.key, record);
}
