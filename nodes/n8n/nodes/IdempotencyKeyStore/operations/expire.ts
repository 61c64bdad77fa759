/** Expire (operator token): end a record's window now, so the next claim starts afresh. */
import type { INodeProperties } from 'n8n-workflow';

import type { JsonObject } from '../../shared/contract';
import { recordCall } from '../../shared/keystore';
import type { Ctx } from './common';
import { readScopeAndKey, recordInfo } from './common';

export const description: INodeProperties[] = [
	{
		displayName:
			'Expire needs a token with the operator role. A record whose lease is still live is refused (409 in_progress).',
		name: 'expireNotice',
		type: 'notice',
		default: '',
		displayOptions: { show: { operation: ['expire'] } },
	},
];

export async function execute(c: Ctx, index: number): Promise<JsonObject> {
	const { scope, key } = readScopeAndKey(c.ctx, index);
	const record = await recordCall(c, '/v1/expire', { scope, key }, index);
	return recordInfo(scope, key, record);
}
