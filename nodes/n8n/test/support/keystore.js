'use strict';
/**
 * A real key store for the tests: `keystore serve` on a free loopback port with its own SQLite
 * file in a temp dir, a tenant and client/operator tokens made with the CLI. Nothing here
 * stands in for the service.
 *   KEYSTORE_BIN   the service's CLI (default: <repo>/.venv/bin/keystore)
 */
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const REPO = path.resolve(__dirname, '../../../..');
const KEYSTORE_BIN = process.env.KEYSTORE_BIN || path.join(REPO, '.venv/bin/keystore');

function freePort() {
	return new Promise((resolve, reject) => {
		const server = net.createServer();
		server.unref();
		server.on('error', reject);
		server.listen(0, '127.0.0.1', () => {
			const { port } = server.address();
			server.close(() => resolve(port));
		});
	});
}

async function waitFor(check, what, timeoutMs) {
	const deadline = Date.now() + timeoutMs;
	let last;
	while (Date.now() < deadline) {
		try {
			if (await check()) return;
		} catch (error) {
			last = error;
		}
		await new Promise((resolve) => setTimeout(resolve, 100));
	}
	throw new Error(`${what} not ready after ${timeoutMs} ms${last ? `: ${last.message}` : ''}`);
}

class KeyStore {
	/** Starts the service; `await KeyStore.start()` resolves when /readyz answers 200. */
	static async start({ workers = 2, threads = 8 } = {}) {
		if (!fs.existsSync(KEYSTORE_BIN)) {
			throw new Error(`No key store CLI at ${KEYSTORE_BIN}: run scripts/test once, or set KEYSTORE_BIN`);
		}
		const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ks-n8n-'));
		const store = new KeyStore(dir, `sqlite:///${path.join(dir, 'keystore.db')}`, await freePort());
		store.clientToken = store.token('n8n-tests', 'client');
		store.operatorToken = store.token('n8n-tests', 'operator');
		const log = fs.openSync(path.join(dir, 'keystore.log'), 'a');
		store.proc = spawn(
			KEYSTORE_BIN,
			['serve', '--host', '127.0.0.1', '--port', String(store.port), '--workers', String(workers), '--threads', String(threads)],
			{ env: store.env(), stdio: ['ignore', log, log], detached: true },
		);
		store.proc.unref();
		await waitFor(async () => {
			if (store.proc.exitCode !== null) throw new Error(`keystore serve exited: see ${dir}/keystore.log`);
			return (await fetch(`${store.url}/readyz`, { signal: AbortSignal.timeout(2000) })).status === 200;
		}, 'key store', 60_000);
		return store;
	}

	constructor(dir, databaseUrl, port) {
		this.dir = dir;
		this.databaseUrl = databaseUrl;
		this.port = port;
		this.url = `http://127.0.0.1:${port}`;
	}

	env() {
		return { ...process.env, KEYSTORE_DATABASE_URL: this.databaseUrl };
	}

	cli(...args) {
		return execFileSync(KEYSTORE_BIN, args, { env: this.env(), encoding: 'utf8', timeout: 60_000, stdio: ['ignore', 'pipe', 'pipe'] }).trim();
	}

	/** A new token of `role` for `tenant` (created when missing). */
	token(tenant, role) {
		try {
			this.cli('tenant', 'create', tenant);
		} catch (error) {
			if (error.status !== 1) throw error; // 1: the tenant exists already
		}
		return this.cli('token', 'create', '--tenant', tenant, '--role', role).split('\n').pop();
	}

	/** A direct API call (for arranging and checking state), as [status, body]. */
	async api(method, pathAndQuery, body, token = this.clientToken) {
		const response = await fetch(`${this.url}${pathAndQuery}`, {
			method,
			headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
			body: body === undefined ? undefined : JSON.stringify(body),
			signal: AbortSignal.timeout(60_000),
		});
		return [response.status, await response.json()];
	}

	/** Whether this service already serves POST /v1/claim/batch (issue 4). */
	async hasBatch() {
		const [status] = await this.api('POST', '/v1/claim/batch', { scope: 'probe', items: [] });
		return status !== 404 && status !== 405;
	}

	/** Stops the service and removes its temp dir (kept when KEEP_TEST_DIRS is set). */
	stop() {
		if (this.proc && this.proc.exitCode === null) {
			try {
				process.kill(-this.proc.pid, 'SIGTERM');
			} catch {
				/* already gone */
			}
		}
		removeDir(this.dir);
	}
}

function removeDir(dir) {
	if (!process.env.KEEP_TEST_DIRS) fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
}

module.exports = { KeyStore, freePort, waitFor, removeDir, REPO, KEYSTORE_BIN };
