/**
 * When the Guard cannot decide an item (the key store down or refusing, an item it cannot
 * send): what the item says, and what a waiting webhook sender is told. Nothing was claimed
 * for such an item, so the only safe places for it are an error (n8n's error output, or
 * Needs Attention with "On Error: Continue") and, for a sender, an answer that makes it send
 * again: 503. Never New.
 *
 * Why the Guard answers the sender itself: a Webhook node that responds "Using 'Respond to
 * Webhook' Node" is answered 200 with an empty body by n8n 2.x when the execution fails before
 * any Respond node (n8n resolves the waiting response with {} when the execution ends), and a
 * sender that got 200 never resends: the event is lost. n8n sends only the first answer, so a
 * Respond node later in the workflow, or none (other response modes), is not disturbed.
 */
import type {
	IDataObject,
	IExecuteFunctions,
	INodeExecutionData,
	NodeApiError,
	NodeOperationError,
} from 'n8n-workflow';

import type { JsonObject } from './contract';
import { withInfo } from './routing';

/** Codes of failures that resending the same event cannot cure: the event itself is wrong. */
const SENDERS_FAULT = new Set(['invalid_item', 'invalid_request']);

// The sender's next try: a key store restart takes seconds; half a minute keeps a fleet of
// senders from hammering a key store that is coming back (the Zapier app waits as long).
export const RETRY_AFTER_SECONDS = 30;

export interface Failure {
	/** the key store's error code, `unreachable` (no answer) or `invalid_item` */
	reason: string;
	/** whether sending the event again later can succeed */
	retry: boolean;
	message: string;
}

/** What a failure of the Guard is, from the code its error was tagged with (transport.tagged). */
export function failureOf(error: NodeApiError | NodeOperationError): Failure {
	const code = error.context?.keystoreCode;
	// an error without a key store code is a fault of this node or n8n: try again later
	const reason = typeof code === 'string' ? code : 'error';
	return { reason, retry: !SENDERS_FAULT.has(reason), message: error.message };
}

/**
 * The item for an item that failed. Under "Continue (using error output)" it is
 * `{error: {message, reason, retry, scope, key}}` and nothing else: n8n moves only items whose
 * JSON is a lone `error` to the error output (adding the input item's fields there), and it
 * replaces the JSON of any item carrying an Error object with `{error: message}`, so the
 * details ride in the JSON. Otherwise ("Continue", on Needs Attention) it is the input item
 * with the details under the output field, like every Needs Attention item, and `error`.
 */
export function failedItem(
	ctx: IExecuteFunctions,
	index: number,
	error: NodeApiError | NodeOperationError,
	about: { scope?: string; key?: string } = {},
): INodeExecutionData {
	const failure = failureOf(error);
	const details = {
		message: failure.message,
		reason: failure.reason,
		retry: failure.retry,
		scope: about.scope ?? null,
		key: about.key ?? null,
	};
	const pairedItem = { item: index };
	if (ctx.getNode().onError === 'continueErrorOutput') return { json: { error: details }, pairedItem };
	const field = String(ctx.getNodeParameter('outputField', index, 'idempotency'));
	const info = { route: 'needs_attention', outcome: 'error', ...details };
	const json = withInfo(ctx.getInputData()[index].json as JsonObject, field, info);
	return { json: { ...json, error: details }, pairedItem };
}

/**
 * Answers a webhook that waits for a Respond to Webhook node: 503 with Retry-After when a
 * resend can succeed, else 400. The body names only the reason: never the key store's
 * address or the message.
 */
export async function answerWebhook(ctx: IExecuteFunctions, failure: Failure): Promise<void> {
	const body: IDataObject = { status: failure.retry ? 'try_later' : 'rejected', reason: failure.reason };
	const headers: IDataObject = { 'content-type': 'application/json; charset=utf-8' };
	if (failure.retry) headers['retry-after'] = String(RETRY_AFTER_SECONDS);
	try {
		await Promise.resolve(ctx.sendResponse({ statusCode: failure.retry ? 503 : 400, headers, body }));
	} catch {
		// Best effort: the execution fails with the real error either way.
	}
}
