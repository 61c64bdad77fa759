/** Complete: record the side effect's outcome (POST /v1/complete), after the side effect. */
import type { IDataObject, INodeProperties } from 'n8n-workflow';

import type { JsonObject } from '../../shared/contract';
import { recordCall } from '../../shared/keystore';
import type { Ctx } from './common';
import { leaseTokenProperty, readLease, recordInfo } from './common';

const show = { operation: ['complete'] };

export const description: INodeProperties[] = [
	leaseTokenProperty('complete'),
	{
		displayName: 'Outcome',
		name: 'state',
		type: 'options',
		default: 'succeeded',
		options: [
			{ name: 'Succeeded', value: 'succeeded', description: 'The side effect happened' },
			{
				name: 'Failed (Permanently)',
				value: 'failed',
				description: 'It will never succeed; repeats get this failure back. For a transient failure use Release.',
			},
		],
		displayOptions: { show },
	},
	{
		displayName: 'Resource ID',
		name: 'resourceId',
		type: 'string',
		default: '',
		placeholder: 'INV-42',
		description: 'What the side effect created (an invoice number): repeats get it back',
		displayOptions: { show },
	},
	{
		displayName: 'Status Code',
		name: 'statusCode',
		type: 'number',
		typeOptions: { minValue: 0, maxValue: 599 },
		default: 0,
		description: 'An HTTP status to answer repeats with (100-599); 0 for none',
		displayOptions: { show },
	},
	{
		displayName: 'Result Body',
		name: 'resultBody',
		type: 'options',
		default: 'item',
		options: [
			{ name: 'Input Item', value: 'item', description: "This node's input item (e.g. the created invoice)" },
			{ name: 'Custom JSON', value: 'custom' },
			{ name: 'None', value: 'none' },
		],
		description: 'Stored with the record (at most 256 KiB) and handed to every repeat',
		displayOptions: { show },
	},
	{
		displayName: 'Custom Result Body',
		name: 'resultCustom',
		type: 'json',
		default: '={{ $json }}',
		displayOptions: { show: { ...show, resultBody: ['custom'] } },
	},
];

export async function execute(c: Ctx, index: number): Promise<JsonObject> {
	const { ctx } = c;
	const lease = readLease(ctx, index);
	const result: IDataObject = {};
	const resourceId = String(ctx.getNodeParameter('resourceId', index, '') ?? '');
	if (resourceId !== '') result.resource_id = resourceId;
	const statusCode = Number(ctx.getNodeParameter('statusCode', index, 0));
	if (statusCode > 0) result.status_code = statusCode;
	const bodyMode = ctx.getNodeParameter('resultBody', index) as 'item' | 'custom' | 'none';
	if (bodyMode === 'item') result.body = ctx.getInputData()[index].json;
	if (bodyMode === 'custom') result.body = parsed(ctx.getNodeParameter('resultCustom', index));
	const state = ctx.getNodeParameter('state', index) as string;
	const record = await recordCall(c, '/v1/complete', { ...lease, state, result }, index);
	return recordInfo(lease.scope, lease.key, record);
}

function parsed(value: unknown): IDataObject {
	if (typeof value !== 'string') return value as IDataObject;
	try {
		return JSON.parse(value) as IDataObject;
	} catch {
		return value as unknown as IDataObject;
	}
}
