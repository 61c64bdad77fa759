/** Claim: POST /v1/claim for each item; every outcome is an answer, none is an error. */
import type { INodeProperties } from 'n8n-workflow';

import type { JsonObject } from '../../shared/contract';
import { claim } from '../../shared/keystore';
import { claimOptions, payloadProperties, readClaim, readClaimOptions } from '../../shared/properties';
import { claimInfo } from '../../shared/routing';
import type { Ctx } from './common';

const show = { operation: ['claim'] };

export const description: INodeProperties[] = [...payloadProperties(show), claimOptions(show)];

export async function execute(c: Ctx, index: number): Promise<JsonObject> {
	const { scope, item } = readClaim(c.ctx, index);
	const answer = await claim(c, scope, item, readClaimOptions(c.ctx, index), index);
	return claimInfo(scope, item.key, answer) as unknown as JsonObject;
}
