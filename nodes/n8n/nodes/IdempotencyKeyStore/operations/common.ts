/** What every operation module shares: its context, and reading the lease parameters. */
import type { IExecuteFunctions, INodeProperties } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

import type { JsonObject } from '../../shared/contract';
import type { Ctx } from '../../shared/keystore';

export type { Ctx };

/** One item's operation: returns what goes under the output field. */
export type ItemOperation = (c: Ctx, index: number) => Promise<JsonObject>;

export function leaseTokenProperty(operation: string): INodeProperties {
	return {
		displayName: 'Lease Token',
		name: 'leaseToken',
		type: 'string',
		typeOptions: { password: true },
		required: true,
		default: '={{ $json.idempotency.lease_token }}',
		description:
			'The lease token of the claim. After a side-effect node the item is its output, so read the token from the Guard node by name (see the docs).',
		displayOptions: { show: { operation: [operation] } },
	};
}

/** Scope, key and lease token of an item; an empty one is a workflow mistake, said plainly. */
export function readLease(
	ctx: IExecuteFunctions,
	index: number,
): { scope: string; key: string; lease_token: string } {
	const scope = String(ctx.getNodeParameter('scope', index) ?? '');
	const key = String(ctx.getNodeParameter('key', index) ?? '');
	const leaseToken = String(ctx.getNodeParameter('leaseToken', index) ?? '');
	for (const [name, value] of [
		['Scope', scope],
		['Key', key],
		['Lease Token', leaseToken],
	]) {
		if (value === '' || value === 'undefined') {
			throw new NodeOperationError(ctx.getNode(), `${name} is empty`, {
				itemIndex: index,
				description:
					"After a side-effect node the item no longer holds the Guard's fields: read them with $('Idempotency Guard').item.json.idempotency",
			});
		}
	}
	return { scope, key, lease_token: leaseToken };
}

export function readScopeAndKey(ctx: IExecuteFunctions, index: number): { scope: string; key: string } {
	return {
		scope: String(ctx.getNodeParameter('scope', index)),
		key: String(ctx.getNodeParameter('key', index)),
	};
}

export function recordInfo(scope: string, key: string, record: { state: string }): JsonObject {
	return { scope, key, state: record.state, record: record as unknown as JsonObject };
}
