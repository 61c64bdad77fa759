/**
 * The Guard's execution: claim every item (one by one, or in batches of up to 1,000), settle
 * each on New, Already Done or Needs Attention, keep item pairing. If the node fails halfway,
 * the leases it already acquired in this execution are released, so items that never reached
 * their side effect are not left for a person to reconcile.
 */
import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import type { JsonObject } from '../shared/contract';
import { MAX_BATCH_ITEMS } from '../shared/contract';
import type { Guarded } from '../shared/guard';
import { guardOne, settle } from '../shared/guard';
import type { ClaimItem, Ctx } from '../shared/keystore';
import { claimBatch, recordCall } from '../shared/keystore';
import { readClaim, readClaimOptions } from '../shared/properties';
import { NEEDS_ATTENTION, guardInfo, refusedInfo, withInfo } from '../shared/routing';
import { asNodeError, baseUrl } from '../shared/transport';

type Outputs = INodeExecutionData[][];

interface Claimed {
	index: number;
	scope: string;
	key: string;
	leaseToken: string;
}

export async function runGuard(ctx: IExecuteFunctions, continueOnFail: boolean): Promise<Outputs> {
	const items = ctx.getInputData();
	const c: Ctx = { ctx, url: await baseUrl(ctx) };
	const outputs: Outputs = [[], [], []];
	const acquired: Claimed[] = [];
	const mode = ctx.getNodeParameter('mode', 0) as 'single' | 'batch';
	const fail = (index: number, error: unknown) => {
		if (!continueOnFail) throw asNodeError(ctx, error, index);
		outputs[NEEDS_ATTENTION].push({ json: { error: (error as Error).message }, pairedItem: { item: index } });
	};
	try {
		if (mode === 'batch') await batch(c, items, outputs, acquired, fail);
		else await oneByOne(c, items, outputs, acquired, fail);
	} catch (error) {
		await releaseAll(c, acquired);
		throw asNodeError(ctx, error);
	}
	return outputs;
}

function route(
	ctx: IExecuteFunctions,
	outputs: Outputs,
	acquired: Claimed[],
	index: number,
	scope: string,
	key: string,
	guarded: Guarded,
): void {
	const field = ctx.getNodeParameter('outputField', index) as string;
	const json = ctx.getInputData()[index].json as JsonObject;
	const info = guardInfo(scope, key, guarded.answer, guarded.output, guarded.reason);
	outputs[guarded.output].push({ json: withInfo(json, field, info), pairedItem: { item: index } });
	if (guarded.answer.lease_token !== undefined) {
		acquired.push({ index, scope, key, leaseToken: guarded.answer.lease_token });
	}
}

/** A failed item: thrown, or with "continue on fail" sent to Needs Attention as an error item. */
type Fail = (index: number, error: unknown) => void;

async function oneByOne(
	c: Ctx,
	items: INodeExecutionData[],
	outputs: Outputs,
	acquired: Claimed[],
	fail: Fail,
) {
	const { ctx } = c;
	for (let index = 0; index < items.length; index++) {
		try {
			const { scope, item } = readClaim(ctx, index);
			const wait = Number(ctx.getNodeParameter('waitSeconds', index, 0));
			const guarded = await guardOne(c, scope, item, readClaimOptions(ctx, index), wait, index);
			route(ctx, outputs, acquired, index, scope, item.key, guarded);
		} catch (error) {
			fail(index, error);
		}
	}
}

/**
 * Batch mode: items are grouped by scope (the batch endpoint takes one scope) in chunks of at
 * most 1,000; each chunk is one transaction on the server. Items that are running elsewhere are
 * then waited for one by one like in single mode.
 */
async function batch(
	c: Ctx,
	items: INodeExecutionData[],
	outputs: Outputs,
	acquired: Claimed[],
	fail: Fail,
) {
	const { ctx } = c;
	const options = readClaimOptions(ctx, 0);
	const groups = new Map<string, Array<{ index: number; item: ClaimItem }>>();
	for (let index = 0; index < items.length; index++) {
		try {
			const { scope, item } = readClaim(ctx, index);
			const group = groups.get(scope) ?? [];
			group.push({ index, item });
			groups.set(scope, group);
		} catch (error) {
			fail(index, error);
		}
	}
	for (const [scope, group] of groups) {
		for (let start = 0; start < group.length; start += MAX_BATCH_ITEMS) {
			const chunk = group.slice(start, start + MAX_BATCH_ITEMS);
			const entries = await claimBatch(c, scope, chunk.map((entry) => entry.item), options);
			for (let i = 0; i < chunk.length; i++) {
				const { index, item } = chunk[i];
				const entry = entries[i];
				if ('refused' in entry) {
					const field = ctx.getNodeParameter('outputField', index) as string;
					const json = ctx.getInputData()[index].json as JsonObject;
					const info = refusedInfo(scope, item.key, entry.refused);
					outputs[NEEDS_ATTENTION].push({ json: withInfo(json, field, info), pairedItem: { item: index } });
					continue;
				}
				const wait = Number(ctx.getNodeParameter('waitSeconds', index, 0));
				const guarded =
					entry.answer.outcome === 'in_progress' && wait >= 1
						? await guardOne(c, scope, item, options, wait, index, entry.answer)
						: settle(entry.answer);
				route(ctx, outputs, acquired, index, scope, item.key, guarded);
			}
		}
	}
	for (const output of outputs) output.sort((a, b) => pairedIndex(a) - pairedIndex(b));
}

function pairedIndex(item: INodeExecutionData): number {
	const paired = item.pairedItem;
	return typeof paired === 'object' && paired !== null && !Array.isArray(paired) ? paired.item : 0;
}

async function releaseAll(c: Ctx, acquired: Claimed[]): Promise<void> {
	for (const claimed of acquired) {
		try {
			await recordCall(
				c,
				'/v1/release',
				{
					scope: claimed.scope,
					key: claimed.key,
					lease_token: claimed.leaseToken,
					reason: 'the Guard node failed before this item reached its side effect',
				},
				claimed.index,
			);
		} catch {
			// Best effort: if the release fails too, the lease runs out and a person sees it.
		}
	}
}
