/**
 * The Guard's execution: claim every item (one by one, or in batches of up to 1,000), settle
 * each on New, Already Done or Needs Attention (docs/outcomes.md), keep item pairing. An item
 * nothing was claimed for (the key store down or refusing, or the key still held by another
 * attempt after the wait: "try later") never goes to New:
 * - with "On Error: Continue" it goes to Needs Attention as an error item (failure.ts), which
 *   n8n moves to the error output under "Continue (using error output)"; this holds also when
 *   the whole run fails (a batch request, the credential), because n8n would pass the input
 *   items on to the first output (New) if the node threw;
 * - otherwise the node fails: it first releases the leases it acquired in this execution (items
 *   that never reached their side effect are not left for a person to reconcile) and answers a
 *   webhook that waits for a Respond node (503, or 400 for an item it cannot send), since n8n
 *   would answer such a webhook 200 with an empty body.
 */
import type { IExecuteFunctions, INodeExecutionData } from 'n8n-workflow';

import type { JsonObject } from '../shared/contract';
import { answerWebhook, failedItem, failureOf } from '../shared/failure';
import type { Guarded } from '../shared/guard';
import { guardOne } from '../shared/guard';
import type { Ctx, IndexedClaim } from '../shared/keystore';
import { claimInBatches, recordCall } from '../shared/keystore';
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
	const outputs: Outputs = [[], [], []];
	const acquired: Claimed[] = [];
	const routed = new Set<number>();
	const about = new Map<number, About>();
	const fail: Fail = (index, error) => {
		const nodeError = asNodeError(ctx, error, index);
		if (!continueOnFail) throw nodeError;
		outputs[NEEDS_ATTENTION].push(failedItem(ctx, index, nodeError, about.get(index)));
		routed.add(index);
	};
	let c: Ctx | undefined;
	try {
		c = { ctx, url: await baseUrl(ctx) };
		const run: Run = { c, outputs, acquired, routed, about, fail };
		const mode = ctx.getNodeParameter('mode', 0) as 'single' | 'batch';
		if (mode === 'batch') await batch(run, items);
		else await oneByOne(run, items);
	} catch (error) {
		const nodeError = asNodeError(ctx, error);
		if (!continueOnFail) {
			if (c) await releaseAll(c, acquired);
			await answerWebhook(ctx, failureOf(nodeError));
			throw nodeError;
		}
		items.forEach((_, index) => {
			if (!routed.has(index)) fail(index, nodeError);
		});
	}
	for (const output of outputs) output.sort((a, b) => pairedIndex(a) - pairedIndex(b));
	return outputs;
}

/**
 * A run of the Guard: its context, outputs, the leases it holds, the items routed so far and
 * the scope and key of each item read so far (for the error item of one that fails later).
 */
interface Run {
	c: Ctx;
	outputs: Outputs;
	acquired: Claimed[];
	routed: Set<number>;
	about: Map<number, About>;
	fail: Fail;
}

type About = { scope: string; key: string };

/** A failed item: thrown, or with "continue on fail" sent to Needs Attention as an error item. */
type Fail = (index: number, error: unknown) => void;

function hold(run: Run, index: number, scope: string, key: string, leaseToken?: string): void {
	if (leaseToken !== undefined) run.acquired.push({ index, scope, key, leaseToken });
}

function route(run: Run, index: number, scope: string, key: string, guarded: Guarded): void {
	const { ctx } = run.c;
	const field = ctx.getNodeParameter('outputField', index) as string;
	const json = ctx.getInputData()[index].json as JsonObject;
	const info = guardInfo(scope, key, guarded.answer, guarded.output, guarded.reason);
	run.outputs[guarded.output].push({ json: withInfo(json, field, info), pairedItem: { item: index } });
	run.routed.add(index);
}

async function oneByOne(run: Run, items: INodeExecutionData[]) {
	const { c } = run;
	for (let index = 0; index < items.length; index++) {
		try {
			const { scope, item } = readClaim(c.ctx, index);
			run.about.set(index, { scope, key: item.key });
			const wait = Number(c.ctx.getNodeParameter('waitSeconds', index, 0));
			const guarded = await guardOne(c, scope, item, readClaimOptions(c.ctx, index), wait, index);
			hold(run, index, scope, item.key, guarded.answer.lease_token);
			route(run, index, scope, item.key, guarded);
		} catch (error) {
			run.fail(index, error);
		}
	}
}

/**
 * Batch mode: one request per scope and 1,000 items (see claimInBatches). Every lease of a
 * chunk is held before anything else can fail; an item running elsewhere is then claimed once
 * more alone, with the wait and the lease token it proposed in the batch, and a refused item
 * goes to Needs Attention.
 */
async function batch(run: Run, items: INodeExecutionData[]) {
	const { c } = run;
	const { ctx } = c;
	const options = readClaimOptions(ctx, 0);
	const claims: IndexedClaim[] = [];
	for (let index = 0; index < items.length; index++) {
		try {
			const claim = readClaim(ctx, index);
			run.about.set(index, { scope: claim.scope, key: claim.item.key });
			claims.push({ index, ...claim });
		} catch (error) {
			run.fail(index, error);
		}
	}
	await claimInBatches(c, claims, options, async (chunk, entries) => {
		chunk.forEach(({ index, scope, item }, i) => {
			const entry = entries[i];
			if ('answer' in entry) hold(run, index, scope, item.key, entry.answer.lease_token);
		});
		for (let i = 0; i < chunk.length; i++) {
			const { index, scope, item } = chunk[i];
			const entry = entries[i];
			if ('refused' in entry) {
				const field = ctx.getNodeParameter('outputField', index) as string;
				const json = ctx.getInputData()[index].json as JsonObject;
				const info = refusedInfo(scope, item.key, entry.refused);
				run.outputs[NEEDS_ATTENTION].push({ json: withInfo(json, field, info), pairedItem: { item: index } });
				run.routed.add(index);
				continue;
			}
			try {
				const wait = Number(ctx.getNodeParameter('waitSeconds', index, 0));
				const guarded = await guardOne(c, scope, item, options, wait, index, entry.answer);
				if (entry.answer.outcome !== 'acquired') hold(run, index, scope, item.key, guarded.answer.lease_token);
				route(run, index, scope, item.key, guarded);
			} catch (error) {
				run.fail(index, error);
			}
		}
	});
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
