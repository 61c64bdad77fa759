import type {
	IExecuteFunctions,
	INodeExecutionData,
	INodeType,
	INodeTypeDescription,
} from 'n8n-workflow';
import { NodeConnectionTypes } from 'n8n-workflow';

import { runGuard } from './execute';
import {
	claimOptions,
	outputField,
	payloadProperties,
	scopeAndKey,
} from '../shared/properties';
import { testCredential } from '../shared/credentialTest';

/**
 * Claim a stable key before a side effect and branch on the answer (docs/outcomes.md): New (do
 * it; the lease token travels with the item), Already Done (the first attempt's stored result),
 * Needs Attention (a different payload, or an unknown outcome: a person decides). Try later
 * (another execution still working on the key after the wait, the key store down) is the
 * node's error.
 */
export class IdempotencyGuard implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Idempotency Guard',
		name: 'idempotencyGuard',
		icon: 'file:keystore.svg',
		group: ['transform'],
		version: 1,
		subtitle: '={{ $parameter["scope"] }}',
		description:
			'Let each business event through once: New, Already Done or Needs Attention, decided by an Idempotency Key Store',
		defaults: { name: 'Idempotency Guard' },
		inputs: [NodeConnectionTypes.Main],
		outputs: [NodeConnectionTypes.Main, NodeConnectionTypes.Main, NodeConnectionTypes.Main],
		outputNames: ['New', 'Already Done', 'Needs Attention'],
		usableAsTool: true,
		credentials: [{ name: 'idempotencyKeyStoreApi', required: true, testedBy: 'idempotencyKeyStoreApiTest' }],
		properties: [
			{
				displayName:
					'New: do the side effect, then an Idempotency Key Store node with Complete. On its error branch: Release. Behind a webhook, set Settings > On Error to "Continue (using error output)" and answer that output 503: it gets the items nothing was claimed for (the key store down, or another execution still working on the key): try later.',
				name: 'notice',
				type: 'notice',
				default: '',
			},
			...scopeAndKey(),
			...payloadProperties(),
			{
				displayName: 'Claim Items',
				name: 'mode',
				type: 'options',
				default: 'single',
				options: [
					{
						name: 'All at Once (Batch)',
						value: 'batch',
						description: 'One request for all items (polling: many records per run)',
					},
					{
						name: 'One by One',
						value: 'single',
						description: 'One claim per item (webhooks, queues)',
					},
				],
			},
			{
				displayName: 'Wait for a Running Attempt (Seconds)',
				name: 'waitSeconds',
				type: 'number',
				typeOptions: { minValue: 0, maxValue: 30 },
				default: 10,
				description:
					'When another execution is still working on the same key, the key store waits this long (at most 30 s) for its result; still running then, the item is an error: try later',
			},
			claimOptions(),
			outputField(),
		],
	};

	methods = { credentialTest: { idempotencyKeyStoreApiTest: testCredential } };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return runGuard(this, this.continueOnFail());
	}
}
