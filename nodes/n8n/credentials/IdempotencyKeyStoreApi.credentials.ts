import type { IAuthenticateGeneric, ICredentialType, INodeProperties } from 'n8n-workflow';

/**
 * The key store's URL and a bearer token (`keystore token create --tenant T --role client`).
 * The tenant comes from the token, never from a node. Its test is a function of the nodes
 * (`testedBy`, nodes/shared/credentialTest.ts): GET /v1/whoami, showing tenant and role.
 */
export class IdempotencyKeyStoreApi implements ICredentialType {
	name = 'idempotencyKeyStoreApi';

	displayName = 'Idempotency Key Store API';

	icon = 'file:../nodes/IdempotencyKeyStore/keystore.svg' as const;

	// the package's own page; its README links the full guide (docs/platforms/n8n-node.md)
	documentationUrl = 'https://www.npmjs.com/package/n8n-nodes-idempotency-keystore';

	properties: INodeProperties[] = [
		{
			displayName: 'Service URL',
			name: 'url',
			type: 'string',
			default: 'http://127.0.0.1:8080',
			placeholder: 'https://keystore.internal:8080',
			description: 'Where the key store answers, without /v1',
			required: true,
		},
		{
			displayName: 'Token',
			name: 'token',
			type: 'string',
			typeOptions: { password: true },
			default: '',
			description: 'A client token (an operator token is needed only for Expire)',
			required: true,
		},
	];

	authenticate: IAuthenticateGeneric = {
		type: 'generic',
		properties: {
			headers: { Authorization: '=Bearer {{$credentials.token}}' },
		},
	};
}
