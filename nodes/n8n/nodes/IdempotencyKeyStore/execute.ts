/**
 * The Key Store node's execution: the chosen operation per item (Claim Batch: all items at
 * once), the answer under the output field of the item, pairing kept, "continue on fail" honoured.
 */
import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import type { JsonObject } from '../shared/contract';
import { withInfo } from '../shared/routing';
import { asNodeError, baseUrl } from '../shared/transport';
import * as claim from './operations/claim';
import * as claimBatch from './operations/claimBatch';
import type { Ctx, ItemOperation } from './operations/common';
import * as complete from './operations/complete';
import * as expire from './operations/expire';
import * as extend from './operations/extend';
import * as lookup from './operations/lookup';
import * as release from './operations/release';
import * as sendOnce from './operations/sendOnce';

const PER_ITEM: Record<string, ItemOperation> = {
	claim: claim.execute,
	complete: complete.execute,
	release: release.execute,
	extend: extend.execute,
	lookup: lookup.execute,
	expire: expire.execute,
	[sendOnce.OPERATION]: sendOnce.execute,
};

export async function runKeyStore(
	ctx: IExecuteFunctions,
	continueOnFail: boolean,
): Promise<INodeExecutionData[][]> {
	const items = ctx.getInputData();
	const c: Ctx = { ctx, url: await baseUrl(ctx) };
	const operation = ctx.getNodeParameter('operation', 0) as string;
	const out: INodeExecutionData[] = [];
	const emit = (index: number, answer: JsonObject) => {
		const field = ctx.getNodeParameter('outputField', index) as string;
		out.push({ json: withInfo(items[index].json as JsonObject, field, answer), pairedItem: { item: index } });
	};
	if (operation === 'claimBatch') {
		try {
			const answers = await claimBatch.executeAll(c, items);
			answers.forEach((answer, index) => emit(index, answer));
		} catch (error) {
			// one request for all items: when it fails, it failed for every item
			if (!continueOnFail) throw asNodeError(ctx, error);
			items.forEach((_, index) => out.push({ json: { error: (error as Error).message }, pairedItem: { item: index } }));
		}
		return [out];
	}
	const run = PER_ITEM[operation];
	for (let index = 0; index < items.length; index++) {
		try {
			emit(index, await run(c, index));
		} catch (error) {
			if (!continueOnFail) throw asNodeError(ctx, error, index);
			out.push({ json: { error: errorJson(error) }, pairedItem: { item: index } });
		}
	}
	return [out];
}

/**
 * An item's error under "On Error: Continue": the message, and for an error that carries an
 * answer of the key store (Send Once's `send_failed`: the API's stored refusal) that answer
 * beside it, with the reason. A lone `error` member sends the item to n8n's error output
 * under "Continue (using error output)".
 */
function errorJson(error: unknown): JsonObject | string {
	const { message } = error as Error;
	const context = (error as { context?: { keystoreInfo?: JsonObject; keystoreCode?: string } }).context;
	if (!context?.keystoreInfo) return message;
	return { message, reason: context.keystoreCode ?? 'error', ...context.keystoreInfo };
}
