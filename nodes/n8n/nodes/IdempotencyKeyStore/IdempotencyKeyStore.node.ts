import type {
	IExecuteFunctions,
	INodeExecutionData,
	INodeType,
	INodeTypeDescription,
} from 'n8n-workflow';
import { NodeConnectionTypes } from 'n8n-workflow';

import { runKeyStore } from './execute';
import * as claim from './operations/claim';
import * as claimBatch from './operations/claimBatch';
import * as complete from './operations/complete';
import * as expire from './operations/expire';
import * as extend from './operations/extend';
import * as lookup from './operations/lookup';
import * as release from './operations/release';
import * as sendOnce from './operations/sendOnce';
import { outputField, scopeAndKey } from '../shared/properties';
import { testCredential } from '../shared/credentialTest';

const HOLDER_OPERATIONS = ['complete', 'release', 'extend'];
const OTHER_OPERATIONS = ['claim', 'claimBatch', 'lookup', 'expire', sendOnce.OPERATION];

/**
 * The key store's operations, one request per item (Claim Batch: one per 1,000 items). Use
 * the Idempotency Guard node to branch on a claim; use this node for Complete after the side
 * effect and Release on its error branch.
 */
export class IdempotencyKeyStore implements INodeType {
	description: INodeTypeDescription = {
		displayName: 'Idempotency Key Store',
		name: 'idempotencyKeyStore',
		icon: 'file:keystore.svg',
		group: ['transform'],
		version: 1,
		subtitle: '={{ $parameter["operation"] + ": " + $parameter["scope"] }}',
		description:
			'Claim, complete, release, extend, look up or expire keys in an Idempotency Key Store, or have it send a request once',
		defaults: { name: 'Idempotency Key Store' },
		inputs: [NodeConnectionTypes.Main],
		outputs: [NodeConnectionTypes.Main],
		usableAsTool: true,
		credentials: [{ name: 'idempotencyKeyStoreApi', required: true, testedBy: 'idempotencyKeyStoreApiTest' }],
		properties: [
			{
				displayName: 'Resource',
				name: 'resource',
				type: 'options',
				noDataExpression: true,
				default: 'lease',
				options: [
					{ name: 'Claim', value: 'claim', description: 'Claim keys before side effects' },
					{
						name: 'Lease',
						value: 'lease',
						description: 'What the holder of a claim does: complete, release, extend',
					},
					{ name: 'Record', value: 'record', description: 'Read or expire the record of a key' },
					{
						name: 'Send',
						value: 'send',
						description: "Have the key store make an API request once per key, with a connection's credentials",
					},
				],
			},
			{
				displayName: 'Operation',
				name: 'operation',
				type: 'options',
				noDataExpression: true,
				default: 'claim',
				displayOptions: { show: { resource: ['claim'] } },
				options: [
					{
						name: 'Claim',
						value: 'claim',
						action: 'Claim a key before a side effect',
						description: 'Claim a key before a side effect; every outcome is returned on the item',
					},
					{
						name: 'Claim Batch',
						value: 'claimBatch',
						action: 'Claim many keys in one request',
						description: 'Claim the keys of all items in one request (polling), with versions',
					},
				],
			},
			{
				displayName: 'Operation',
				name: 'operation',
				type: 'options',
				noDataExpression: true,
				default: 'complete',
				displayOptions: { show: { resource: ['lease'] } },
				options: [
					{
						name: 'Complete',
						value: 'complete',
						action: 'Record the outcome of a side effect',
						description: 'Record the outcome after the side effect; repeats get this result',
					},
					{
						name: 'Extend',
						value: 'extend',
						action: 'Extend the lease of a running attempt',
						description: 'Extend the lease of long work and note a checkpoint',
					},
					{
						name: 'Release',
						value: 'release',
						action: 'Give an attempt back after a transient failure',
						description: 'Give the attempt back after a transient failure; the next claim retries',
					},
				],
			},
			{
				displayName: 'Operation',
				name: 'operation',
				type: 'options',
				noDataExpression: true,
				default: 'lookup',
				displayOptions: { show: { resource: ['record'] } },
				options: [
					{
						name: 'Expire',
						value: 'expire',
						action: 'Expire a key now',
						description: 'End the key window now so the next claim starts afresh (operator token)',
					},
					{
						name: 'Lookup',
						value: 'lookup',
						action: 'Look up a key',
						description: 'Read the record of a key, optionally waiting while it is in progress',
					},
				],
			},
			{
				displayName: 'Operation',
				name: 'operation',
				type: 'options',
				noDataExpression: true,
				default: 'sendOnce',
				displayOptions: { show: { resource: ['send'] } },
				options: [
					{
						name: 'Send Once',
						value: 'sendOnce',
						action: 'Send a request once',
						description:
							"The key store makes the request to a connection's API at most once per key; repeats get its first answer",
					},
				],
			},
			...scopeAndKey({ operation: OTHER_OPERATIONS }),
			...scopeAndKey({ operation: HOLDER_OPERATIONS }, true),
			...claim.description,
			...claimBatch.description,
			...complete.description,
			...release.description,
			...extend.description,
			...lookup.description,
			...expire.description,
			...sendOnce.description,
			outputField(),
		],
	};

	methods = { credentialTest: { idempotencyKeyStoreApiTest: testCredential } };

	async execute(this: IExecuteFunctions): Promise<INodeExecutionData[][]> {
		return runKeyStore(this, this.continueOnFail());
	}
}
