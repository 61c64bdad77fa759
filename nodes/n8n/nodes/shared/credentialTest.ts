/**
 * The credential's test: GET /v1/whoami with the token, which only a key store that accepts
 * the token answers with 200 {tenant, role, token}. The test says who the token is (tenant and
 * role) when it passes, and which mistake it found when it fails: a Service URL ending in /v1
 * (the nodes add /v1 themselves), a refused token, something else answering at the URL, or no
 * answer at all.
 *
 * It is a function on the nodes (`testedBy`), not a declarative `test` on the credential,
 * because n8n gives a declarative test only the fixed text "Connection successful!".
 */
import type { ICredentialTestFunctions, ICredentialsDecrypted, INodeCredentialTestResult } from 'n8n-workflow';

import { errorOf } from './contract';

// A whoami is one indexed read; 10 s without an answer means nothing usable is listening.
const TEST_TIMEOUT_MS = 10_000;

/** Why this Service URL cannot work, or undefined if it may. */
export function urlProblem(raw: string): string | undefined {
	// the URL parser would drop a CR/LF or tab silently; the request must not get them either
	// eslint-disable-next-line no-control-regex
	if (/[\u0000-\u001f\u007f]/.test(raw)) return 'The Service URL must not contain control characters (a line break?)';
	let url: URL;
	try {
		url = new URL(raw);
	} catch {
		return `The Service URL "${raw}" is not a URL. Use the key store's address, such as http://127.0.0.1:8080`;
	}
	if (url.protocol !== 'http:' && url.protocol !== 'https:') {
		return 'The Service URL must start with http:// or https://';
	}
	if (url.search || url.hash) return 'The Service URL must not have a query (?) or a fragment (#)';
	if (/\/v1$/i.test(url.pathname.replace(/\/+$/, ''))) {
		return `Remove /v1 from the Service URL: the nodes add it themselves. Use ${url.origin}${url.pathname.replace(/\/+$/, '').slice(0, -3)}`;
	}
	return undefined;
}

/** The test's verdict on the answer to GET {url}/v1/whoami. */
export function verdict(url: string, status: number, body: unknown): INodeCredentialTestResult {
	const who = (body ?? {}) as { tenant?: unknown; role?: unknown; token?: unknown };
	if (status === 200 && typeof who.tenant === 'string' && typeof who.role === 'string') {
		const name = typeof who.token === 'string' ? ` "${who.token}"` : '';
		return {
			status: 'OK',
			message: `Connected: tenant "${who.tenant}", ${who.role} token${name}.`,
		};
	}
	const error = errorOf(body);
	if (error?.code === 'unauthorized') {
		return {
			status: 'Error',
			message: 'The key store refused this token (401). Create one with: keystore token create --tenant NAME --role client',
		};
	}
	if (error?.code === 'not_found') {
		return {
			status: 'Error',
			message: `A key store answered at ${url}, but has no /v1/whoami: use its root address as the Service URL (without /v1), and a key store of contract v1.1 or later.`,
		};
	}
	if (error) return { status: 'Error', message: `The key store answered ${status} ${error.code}: ${error.message}` };
	return {
		status: 'Error',
		message: `No Idempotency Key Store answered at ${url} (HTTP ${status}). Check the Service URL (without /v1).`,
	};
}

/** The nodes' `methods.credentialTest.idempotencyKeyStoreApiTest` (their `testedBy`). */
export async function testCredential(
	this: ICredentialTestFunctions,
	credential: ICredentialsDecrypted,
): Promise<INodeCredentialTestResult> {
	const url = String(credential.data?.url ?? '').trim().replace(/\/+$/, '');
	const problem = urlProblem(url);
	if (problem !== undefined) return { status: 'Error', message: problem };
	let answer: { statusCode: number; body: unknown };
	try {
		// n8n gives a credential test no other HTTP helper (n8n-core CredentialTestContext).
		// eslint-disable-next-line @n8n/community-nodes/no-deprecated-workflow-functions
		answer = await this.helpers.request({
			method: 'GET',
			uri: `${url}/v1/whoami`,
			headers: { Authorization: `Bearer ${String(credential.data?.token ?? '')}`, Accept: 'application/json' },
			json: true,
			simple: false, // every HTTP status resolves: verdict() reads it
			resolveWithFullResponse: true,
			timeout: TEST_TIMEOUT_MS,
		});
	} catch (error) {
		const { code, message } = error as { code?: string; message?: string };
		return { status: 'Error', message: `The key store at ${url} did not answer (${code ?? message ?? 'no answer'}).` };
	}
	return verdict(url, answer.statusCode, answer.body);
}
