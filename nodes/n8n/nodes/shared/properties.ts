/**
 * Node parameters shared by the Key Store and the Guard node, and the one function that reads
 * a claim's parameters for an item. `show` limits a parameter to some operations.
 */
import type { IDataObject, IDisplayOptions, IExecuteFunctions, INodeProperties } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

import type { JsonObject } from './contract';
import type { PayloadMode } from './fingerprint';
import { fingerprintPart, versionOf } from './fingerprint';
import type { ClaimItem, ClaimOptions } from './keystore';
import { asNodeError, tagged } from './transport';

export const DEFAULT_FIELD = 'idempotency';

function shown(show?: IDisplayOptions['show']): { displayOptions?: IDisplayOptions } {
	return show ? { displayOptions: { show } } : {};
}

const SCOPE_DESCRIPTION =
	'The kind of operation, e.g. create_invoice or webhook:stripe. 1-128 characters of A-Z a-z 0-9 _ . : -.';
const KEY_DESCRIPTION =
	'The stable ID of this operation, taken from the business event (an event ID, an order number). Never a fresh random value per run.';

/**
 * Scope and key. For a claim, lookup or expire the user types them (`fromItem` false); for the
 * holder's calls they default to the claim's answer on the item.
 */
export function scopeAndKey(show?: IDisplayOptions['show'], fromItem = false): INodeProperties[] {
	const scope: INodeProperties = {
		displayName: 'Scope',
		name: 'scope',
		type: 'string',
		required: true,
		default: '',
		placeholder: 'create_invoice',
		description: SCOPE_DESCRIPTION,
		...shown(show),
	};
	const key: INodeProperties = {
		displayName: 'Key',
		name: 'key',
		type: 'string',
		required: true,
		default: '',
		placeholder: 'evt_881',
		description: KEY_DESCRIPTION,
		...shown(show),
	};
	if (fromItem) {
		scope.default = '={{ $json.idempotency.scope }}';
		key.default = '={{ $json.idempotency.key }}';
	}
	return [scope, key];
}

export function payloadProperties(show?: IDisplayOptions['show']): INodeProperties[] {
	return [
		{
			displayName: 'Payload',
			name: 'payloadMode',
			type: 'options',
			default: 'fields',
			description:
				'What this operation is about. A repeat with the same key but a different payload is refused and sent to a person.',
			options: [
				{
					name: 'Chosen Fields',
					value: 'fields',
					description: 'The fields listed below (recommended for webhooks: headers change per delivery)',
				},
				{
					name: 'Custom JSON',
					value: 'custom',
					description: 'Any JSON value, usually an expression',
				},
				{
					name: 'None',
					value: 'none',
					description: 'Compare nothing: any repeat of the key counts as the same operation',
				},
				{
					name: 'Ready Fingerprint',
					value: 'fingerprint',
					description: 'A string you computed yourself (e.g. a content hash); compared exactly',
				},
				{
					name: 'Whole Item',
					value: 'wholeItem',
					description: "The item's whole JSON",
				},
			],
			...shown(show),
		},
		{
			displayName: 'Fields',
			name: 'payloadFields',
			type: 'string',
			default: '',
			required: true,
			placeholder: 'body.amount, body.customer_id',
			description:
				'Comma-separated paths into the item (dots for nesting). A missing field counts as null.',
			displayOptions: { show: { ...(show ?? {}), payloadMode: ['fields'] } },
		},
		{
			displayName: 'Custom Payload',
			name: 'payloadCustom',
			type: 'json',
			default: '={{ $json.body }}',
			description: 'The JSON value to fingerprint; hashed by the key store, never stored',
			displayOptions: { show: { ...(show ?? {}), payloadMode: ['custom'] } },
		},
		{
			displayName: 'Fingerprint',
			name: 'fingerprint',
			type: 'string',
			default: '',
			required: true,
			description: 'A ready fingerprint (1-256 printable characters)',
			displayOptions: { show: { ...(show ?? {}), payloadMode: ['fingerprint'] } },
		},
		{
			displayName: 'Version',
			name: 'version',
			type: 'string',
			default: '',
			placeholder: '={{ $json.updated_at }}',
			description:
				'Optional. A whole number or an RFC 3339 timestamp: a finished record with an older version is acquired again as a new change (polling); an equal or older one is a repeat.',
			...shown(show),
		},
	];
}

export function claimOptions(show?: IDisplayOptions['show']): INodeProperties {
	return {
		displayName: 'Options',
		name: 'claimOptions',
		type: 'collection',
		placeholder: 'Add Option',
		default: {},
		...shown(show),
		options: [
			{
				displayName: 'Keep Record For (Seconds)',
				name: 'ttlSeconds',
				type: 'number',
				typeOptions: { minValue: 1, maxValue: 7776000 },
				default: 259200,
				description:
					"How long the key is remembered (1 s to 90 days; the server's default is 72 h). Make it longer than the sender's retry window.",
			},
			{
				displayName: 'Lease (Seconds)',
				name: 'leaseSeconds',
				type: 'number',
				typeOptions: { minValue: 1, maxValue: 86400 },
				default: 300,
				description:
					'How long this attempt holds the key before it counts as stale. Make it longer than the side effect takes, or extend it.',
			},
			{
				displayName: 'When the Lease Runs Out',
				name: 'onStale',
				type: 'options',
				default: 'reconcile',
				options: [
					{
						name: 'Ask a Person (Reconcile)',
						value: 'reconcile',
						description: 'The outcome is unknown: the next repeat goes to Needs Attention',
					},
					{
						name: 'Let the Next Repeat Retry',
						value: 'retry',
						description: 'Only for side effects that are safe to repeat',
					},
				],
			},
		],
	};
}

export function outputField(show?: IDisplayOptions['show']): INodeProperties {
	return {
		displayName: 'Put Answer In Field',
		name: 'outputField',
		type: 'string',
		default: DEFAULT_FIELD,
		description:
			"The item field that receives the key store's answer; the item's other fields pass through unchanged",
		...shown(show),
	};
}

/** The claim options of the node (same for every item of an execution). */
export function readClaimOptions(ctx: IExecuteFunctions, itemIndex = 0): ClaimOptions {
	const raw = ctx.getNodeParameter('claimOptions', itemIndex, {}) as IDataObject;
	const options: ClaimOptions = {};
	if (raw.ttlSeconds !== undefined) options.ttl_seconds = Number(raw.ttlSeconds);
	if (raw.leaseSeconds !== undefined) options.lease_seconds = Number(raw.leaseSeconds);
	if (raw.onStale !== undefined) options.on_stale = raw.onStale as 'reconcile' | 'retry';
	return options;
}

/** Scope and claim item (key, payload or fingerprint, version) of one input item. */
export function readClaim(ctx: IExecuteFunctions, itemIndex: number): { scope: string; item: ClaimItem } {
	const json = ctx.getInputData()[itemIndex].json as JsonObject;
	const scope = String(ctx.getNodeParameter('scope', itemIndex));
	const key = ctx.getNodeParameter('key', itemIndex) as unknown;
	if ((typeof key !== 'string' && typeof key !== 'number') || String(key) === '') {
		const empty = new NodeOperationError(ctx.getNode(), 'The key is empty', {
			itemIndex,
			description: 'The key expression gave nothing for this item: check the field it reads.',
		});
		throw tagged(empty, 'invalid_item');
	}
	const mode = ctx.getNodeParameter('payloadMode', itemIndex) as PayloadMode;
	try {
		const part = fingerprintPart(mode, json, {
			fields: mode === 'fields' ? (ctx.getNodeParameter('payloadFields', itemIndex) as string) : undefined,
			custom: mode === 'custom' ? ctx.getNodeParameter('payloadCustom', itemIndex) : undefined,
			fingerprint: mode === 'fingerprint' ? ctx.getNodeParameter('fingerprint', itemIndex) : undefined,
		});
		const version = versionOf(ctx.getNodeParameter('version', itemIndex, ''));
		return { scope, item: { key: String(key), ...part, ...(version === undefined ? {} : { version }) } };
	} catch (error) {
		throw tagged(asNodeError(ctx, error, itemIndex), 'invalid_item');
	}
}
