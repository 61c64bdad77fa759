'use strict';
/**
 * A real key store that a test owns: `keystore serve` on a free loopback port with its own
 * SQLite file in a temp dir, tokens made with the CLI, and an outage on demand: `halt()`
 * stops the server (its database stays), `resume()` serves the same database on the same
 * port again. Nothing here stands in for the service.
 *   KEYSTORE_BIN   the service's CLI (default: <repo>/.venv/bin/keystore)
 *
 *   const ks = await KeyStore.start();
 *   await ks.halt();    // connections to ks.url are refused from now on
 *   await ks.resume();  // the same records, the same tokens, the same URL
 *   await ks.stop();    // gone, with its folder (kept when KEEP_TEST_DIRS is set)
 */
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const REPO = path.resolve(__dirname, '../..');
const KEYSTORE_BIN = process.env.KEYSTORE_BIN || path.join(REPO, '.venv/bin/keystore');
// A cold start on a busy 2-core CI machine (migrations, gunicorn workers) takes seconds; a
// minute means it is broken.
const START_TIMEOUT_MS = 60_000;
// gunicorn's graceful stop waits for requests in flight; 20 s is far more than any here.
const STOP_TIMEOUT_MS = 20_000;

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

/** Resolves once `check()` resolves truthy; rejects after timeoutMs with the last error. */
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

function removeDir(dir) {
	if (!process.env.KEEP_TEST_DIRS) fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
}

class KeyStore {
	/**
	 * Starts the service with a tenant `tenant` and a client and an operator token for it;
	 * resolves when GET /readyz answers 200.
	 */
	static async start({ workers = 2, threads = 8, tenant = 'node-tests' } = {}) {
		if (!fs.existsSync(KEYSTORE_BIN)) {
			throw new Error(`No key store CLI at ${KEYSTORE_BIN}: run scripts/test once, or set KEYSTORE_BIN`);
		}
		const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ks-nodes-'));
		const store = new KeyStore(dir, await freePort(), { workers, threads });
		store.tenant = tenant;
		store.cli('db', 'upgrade'); // the admin commands refuse a database without the schema
		store.clientToken = store.token(tenant, 'client');
		store.operatorToken = store.token(tenant, 'operator');
		await store.resume();
		return store;
	}

	constructor(dir, port, { workers, threads }) {
		this.dir = dir;
		this.databaseUrl = `sqlite:///${path.join(dir, 'keystore.db')}`;
		this.port = port;
		this.url = `http://127.0.0.1:${port}`;
		this.serveArgs = ['serve', '--host', '127.0.0.1', '--port', String(port), '--workers', String(workers), '--threads', String(threads)];
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

	/** Serves the database on this store's port; resolves when GET /readyz answers 200. */
	async resume() {
		if (this.proc && this.proc.exitCode === null) return;
		const log = fs.openSync(path.join(this.dir, 'keystore.log'), 'a');
		this.proc = spawn(KEYSTORE_BIN, this.serveArgs, { env: this.env(), stdio: ['ignore', log, log], detached: true });
		fs.closeSync(log);
		this.proc.unref();
		const proc = this.proc;
		await waitFor(async () => {
			if (proc.exitCode !== null) throw new Error(`keystore serve exited: see ${this.dir}/keystore.log`);
			return (await fetch(`${this.url}/readyz`, { signal: AbortSignal.timeout(2000) })).status === 200;
		}, 'key store', START_TIMEOUT_MS);
	}

	/**
	 * Stops the server (its whole process group) and waits until it has exited and its port
	 * refuses connections; the database stays for resume().
	 */
	async halt() {
		const proc = this.proc;
		if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
		const exited = new Promise((resolve) => proc.once('exit', resolve));
		signalGroup(proc, 'SIGTERM');
		const timer = setTimeout(() => signalGroup(proc, 'SIGKILL'), STOP_TIMEOUT_MS);
		await exited;
		clearTimeout(timer);
		signalGroup(proc, 'SIGKILL'); // a worker that outlived its master
		await waitFor(async () => {
			try {
				await fetch(`${this.url}/healthz`, { signal: AbortSignal.timeout(1000) });
				return false;
			} catch {
				return true; // refused: the outage has begun
			}
		}, 'the key store to stop listening', STOP_TIMEOUT_MS);
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

	/** Stops the service and removes its temp dir (kept when KEEP_TEST_DIRS is set). */
	async stop() {
		await this.halt();
		removeDir(this.dir);
	}
}

function signalGroup(proc, signal) {
	try {
		process.kill(-proc.pid, signal);
	} catch {
		/* already gone */
	}
}

module.exports = { KeyStore, freePort, waitFor, removeDir, REPO, KEYSTORE_BIN };
