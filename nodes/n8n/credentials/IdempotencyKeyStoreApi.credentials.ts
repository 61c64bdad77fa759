import type {
	IAuthenticateGeneric,
	ICredentialTestRequest,
	ICredentialType,
	INodeProperties,
} from 'n8n-workflow';

/**
 * The key store's URL and a bearer token (`keystore token create --tenant T --role client`).
 * The tenant comes from the token, never from a node.
 */
export class IdempotencyKeyStoreApi implements ICredentialType {
	name = 'idempotencyKeyStoreApi';

	displayName = 'Idempotency Key Store API';

	icon = 'file:../nodes/IdempotencyKeyStore/keystore.svg' as const;

	// the package's own page; its README links the full guide (docs/n8n-node.md)
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

	/**
	 * Looks up a key that is never claimed. Only the key store with a valid token answers that
	 * with its own error object `not_found`, so each rule below fails a different mistake:
	 * a refused token (401 `unauthorized`), and any URL where something else answers (another
	 * service's 200 or 404, an HTML page) because its body has no `error.code`. Nothing is
	 * written, so testing often changes nothing in the store.
	 */
	test: ICredentialTestRequest = {
		request: {
			baseURL: '={{$credentials.url.replace(/\\/+$/, "")}}',
			url: '/v1/keys',
			method: 'GET',
			qs: { scope: 'n8n.credential-test', key: 'token-check' },
			ignoreHttpStatusErrors: true,
		},
		rules: [
			{
				type: 'responseSuccessBody',
				properties: {
					key: 'error.code',
					value: 'unauthorized',
					message: 'The key store refused this token (401). Create one with: keystore token create',
				},
			},
			{
				type: 'responseSuccessBody',
				properties: {
					key: 'error.code',
					value: undefined,
					message:
						'No Idempotency Key Store answered at this URL. Check the Service URL (without /v1).',
				},
			},
		],
	};
}
