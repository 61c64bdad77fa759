/**
 * Send Once: the key store makes one request to a connection's API at most once per (scope,
 * key) (POST /v1/send) and answers with what the API said. The key store decides everything
 * (the claim, the retries, the settlement); this operation maps its answer (docs/outcomes.md):
 *
 *   sent, replay of a success   -> the item, with the API's answer as `result`
 *   accepted                    -> the item, outcome `accepted`, no result yet: the send is
 *                                  queued; run the item again later (the same key) for it
 *   failed, replay of a failure -> the node's error `send_failed` (the API refused for good),
 *                                  with the stored answer on the error item
 *   in_progress, fingerprint_mismatch, needs_reconciliation, not_found... -> the node's error
 *                                  with the key store's code, as every operation of this node
 */
import type { IDataObject, INodeProperties } from 'n8n-workflow';
import { NodeApiError, NodeOperationError } from 'n8n-workflow';

import type { JsonObject, JsonValue, SendAnswer } from '../../shared/contract';
import { MAX_SEND_WAIT, SEND_METHODS, sendRefused } from '../../shared/contract';
import type { SendRequest } from '../../shared/keystore';
import { send } from '../../shared/keystore';
import { tagged } from '../../shared/transport';
import type { Ctx } from './common';

export const OPERATION = 'sendOnce';
const show = { operation: [OPERATION] };

export const description: INodeProperties[] = [
	{
		displayName: 'Connection',
		name: 'connection',
		type: 'string',
		required: true,
		default: '',
		placeholder: 'billing',
		description:
			"The name of a connection in the key store (an operator makes it: base URL, credentials, idempotency header). Its credentials never reach n8n.",
		displayOptions: { show },
	},
	{
		displayName: 'Method',
		name: 'method',
		type: 'options',
		default: 'POST',
		options: SEND_METHODS.map((method) => ({ name: method, value: method })),
		displayOptions: { show },
	},
	{
		displayName: 'Path',
		name: 'path',
		type: 'string',
		required: true,
		default: '',
		placeholder: '/v1/invoices',
		description: "Appended to the connection's base URL; begins with /",
		displayOptions: { show },
	},
	{
		displayName: 'Send Body',
		name: 'sendBody',
		type: 'boolean',
		default: true,
		displayOptions: { show },
	},
	{
		displayName: 'JSON Body',
		name: 'jsonBody',
		type: 'json',
		default: '={{ $json }}',
		description: 'The JSON the API gets',
		displayOptions: { show: { ...show, sendBody: [true] } },
	},
	{
		displayName: 'Resource ID Pointer',
		name: 'resourceIdPointer',
		type: 'string',
		default: '/id',
		description: "A JSON pointer into the API's answer to the ID of what it created; empty for none",
		displayOptions: { show },
	},
	{
		displayName: 'Wait for the Answer (Seconds)',
		name: 'sendWait',
		type: 'number',
		typeOptions: { minValue: 0, maxValue: MAX_SEND_WAIT },
		default: 10,
		description:
			'How long the key store waits for the send to settle before it answers Accepted (0-30). An accepted send goes on in the key store.',
		displayOptions: { show },
	},
	{
		displayName: 'Compare Repeats On',
		name: 'sendPayload',
		type: 'options',
		default: 'body',
		description:
			'What a repeat of the key must match; a repeat with other data is refused (fingerprint_mismatch) and nothing is sent',
		options: [
			{ name: 'JSON Body', value: 'body', description: 'The JSON body above' },
			{ name: 'Custom JSON', value: 'custom', description: 'Any JSON value, usually an expression' },
			{ name: 'Nothing', value: 'none', description: 'Any repeat of the key counts as the same send' },
		],
		displayOptions: { show },
	},
	{
		displayName: 'Custom Payload',
		name: 'sendPayloadCustom',
		type: 'json',
		default: '={{ $json }}',
		displayOptions: { show: { ...show, sendPayload: ['custom'] } },
	},
	{
		displayName: 'Headers',
		name: 'sendHeaders',
		type: 'json',
		default: '{}',
		description:
			"More request headers as a JSON object (not credentials: those are the connection's, kept sealed in the key store)",
		displayOptions: { show },
	},
];

export async function execute(c: Ctx, index: number): Promise<JsonObject> {
	const body = readSend(c, index);
	const answer = await send(c, body, index);
	const info = sendInfo(body, answer);
	if (sendRefused(answer)) throw refused(c, index, info);
	return info;
}

/** The body of POST /v1/send for one item; a parameter that is not JSON is the item's error. */
function readSend(c: Ctx, index: number): SendRequest {
	const p = (name: string, fallback?: unknown) => c.ctx.getNodeParameter(name, index, fallback);
	const key = p('key') as unknown;
	if ((typeof key !== 'string' && typeof key !== 'number') || String(key) === '') {
		throw invalid(c, index, 'The key is empty', 'The key expression gave nothing for this item: check the field it reads.');
	}
	const request: IDataObject = { method: String(p('method', 'POST')), path: String(p('path', '')) };
	const headers = jsonOf(c, index, 'Headers', p('sendHeaders', '{}'));
	if (headers && typeof headers === 'object' && Object.keys(headers).length > 0) request.headers = headers as IDataObject;
	if (p('sendBody', true) === true) request.json = jsonOf(c, index, 'JSON Body', p('jsonBody')) as IDataObject;
	const body: SendRequest = {
		scope: String(p('scope')),
		key: String(key),
		connection: String(p('connection', '')),
		request,
		wait_seconds: Number(p('sendWait', 10)),
	};
	const pointer = String(p('resourceIdPointer', '') ?? '');
	if (pointer !== '') body.resource_id_pointer = pointer;
	const mode = p('sendPayload', 'body');
	if (mode === 'body' && request.json !== undefined) body.payload = request.json as JsonValue;
	if (mode === 'custom') body.payload = jsonOf(c, index, 'Custom Payload', p('sendPayloadCustom')) as JsonValue;
	return body;
}

/** What the item carries under the output field. */
function sendInfo(body: SendRequest, answer: SendAnswer): JsonObject {
	const result = answer.result;
	return {
		scope: body.scope,
		key: body.key,
		connection: body.connection,
		outcome: answer.outcome,
		status_code: result?.status_code ?? null,
		resource_id: result?.resource_id ?? null,
		result: (result ?? null) as JsonObject | null,
		state: answer.record.state,
		record: answer.record as unknown as JsonObject,
	};
}

/** The node's error for a permanent refusal; the stored answer rides on it (execute.ts). */
function refused(c: Ctx, index: number, info: JsonObject): NodeApiError {
	const status = String(info.status_code ?? '');
	const text = JSON.stringify((info.result as JsonObject | null)?.body ?? null);
	const error = new NodeApiError(
		c.ctx.getNode(),
		{ code: 'send_failed', message: `The API answered ${status}`, httpCode: status },
		{
			message: `send_failed: ${info.connection} answered ${status}${info.outcome === 'replay' ? ' (the first send; this is its replay)' : ''}`,
			description: `${text.slice(0, 300)}\n\nThe API refused for good; every repeat of this key gets this answer. Fix the request and use a new key.`,
			httpCode: status,
			itemIndex: index,
		},
	);
	error.context.keystoreInfo = info;
	return tagged(error, 'send_failed');
}

function jsonOf(c: Ctx, index: number, what: string, value: unknown): unknown {
	if (typeof value !== 'string') return value;
	try {
		return JSON.parse(value);
	} catch {
		throw invalid(c, index, `${what} is not JSON`, 'Give a JSON object, or an expression that gives one.');
	}
}

function invalid(c: Ctx, index: number, message: string, description: string): NodeOperationError {
	return tagged(new NodeOperationError(c.ctx.getNode(), message, { itemIndex: index, description }), 'invalid_item');
}
