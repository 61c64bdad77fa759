'use strict';
/**
 * A real n8n for the tests: the cached install (scripts/install-n8n.sh), a user folder in a
 * temp dir, this package installed the way the docs tell users (npm install into
 * <user folder>/.n8n/nodes), and the CLI (import, publish, execute) or `n8n start` on loopback.
 *   N8N_BIN   the n8n executable (ci.sh sets it from the cache)
 */
const { execFile, spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { freePort, removeDir, waitFor } = require('../support/keystore');

const PACKAGE_DIR = path.resolve(__dirname, '../..');
const CLI_TIMEOUT_MS = 180_000; // one n8n CLI command boots n8n: ~5 s idle, far more on a busy CI

function n8nBin() {
	const bin = process.env.N8N_BIN;
	if (!bin || !fs.existsSync(bin)) throw new Error('Set N8N_BIN to the n8n executable (nodes/n8n/ci.sh does)');
	return bin;
}

class N8n {
	/** A fresh user folder with this package installed from its packed tarball. */
	static async create() {
		const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'n8n-e2e-'));
		const n8n = new N8n(dir, await freePort(), await freePort());
		n8n.installPackage();
		return n8n;
	}

	constructor(dir, port, brokerPort) {
		this.dir = dir;
		this.port = port;
		this.brokerPort = brokerPort;
		this.url = `http://127.0.0.1:${port}`;
		this.logPath = path.join(dir, 'n8n.log');
		this.timings = []; // [what, seconds]: where an e2e run spends its time
	}

	timed(what, startedAt) {
		this.timings.push([what, Math.round((Date.now() - startedAt) / 100) / 10]);
	}

	env() {
		return {
			...process.env,
			N8N_USER_FOLDER: this.dir,
			N8N_ENCRYPTION_KEY: 'keystore-e2e-only-not-a-secret',
			N8N_PORT: String(this.port),
			N8N_LISTEN_ADDRESS: '127.0.0.1',
			N8N_HOST: '127.0.0.1',
			N8N_PROTOCOL: 'http',
			WEBHOOK_URL: `${this.url}/`,
			N8N_RUNNERS_BROKER_PORT: String(this.brokerPort),
			N8N_RUNNERS_BROKER_LISTEN_ADDRESS: '127.0.0.1',
			N8N_DIAGNOSTICS_ENABLED: 'false',
			N8N_VERSION_NOTIFICATIONS_ENABLED: 'false',
			N8N_TEMPLATES_ENABLED: 'false',
			N8N_HIRING_BANNER_ENABLED: 'false',
			N8N_PERSONALIZATION_ENABLED: 'false',
			N8N_LOG_LEVEL: 'info',
			N8N_LOG_OUTPUT: 'console',
			DB_SQLITE_POOL_SIZE: '2',
		};
	}

	/** `npm pack` this package and `npm install` the tarball into .n8n/nodes, as a user would. */
	installPackage() {
		const nodesDir = path.join(this.dir, '.n8n', 'nodes');
		fs.mkdirSync(nodesDir, { recursive: true });
		const packed = execFileSync('npm', ['pack', '--json', '--pack-destination', this.dir], {
			cwd: PACKAGE_DIR,
			encoding: 'utf8',
			timeout: 120_000,
			env: { ...process.env, npm_config_ignore_scripts: 'true' },
		});
		const tarball = path.join(this.dir, JSON.parse(packed)[0].filename);
		fs.writeFileSync(path.join(nodesDir, 'package.json'), JSON.stringify({ name: 'installed-nodes', private: true }));
		execFileSync(
			'npm',
			['install', tarball, '--no-audit', '--no-fund', '--legacy-peer-deps', '--ignore-scripts', '--loglevel=error'],
			{ cwd: nodesDir, encoding: 'utf8', timeout: 120_000 },
		);
	}

	/** One n8n CLI command; resolves with its stdout (stderr goes to the log file). */
	cli(...args) {
		const startedAt = Date.now();
		return new Promise((resolve, reject) => {
			execFile(
				n8nBin(),
				args,
				{ env: this.env(), timeout: CLI_TIMEOUT_MS, maxBuffer: 64 * 1024 * 1024 },
				(error, stdout, stderr) => {
					fs.appendFileSync(this.logPath, `\n$ n8n ${args.join(' ')}\n${stdout.slice(0, 20000)}\n${stderr}`);
					this.timed(`n8n ${args[0]}`, startedAt);
					if (error) {
						reject(new Error(`n8n ${args[0]} failed (${error.code ?? error.signal}): ${stderr.slice(-2000)}`));
					} else {
						resolve(stdout);
					}
				},
			);
		});
	}

	/** Imports credentials and workflows (objects) through the CLI, like a user's export. */
	async import(credentials, workflows) {
		const credFile = path.join(this.dir, 'credentials.json');
		fs.writeFileSync(credFile, JSON.stringify(credentials));
		await this.cli('import:credentials', `--input=${credFile}`);
		const workflowDir = path.join(this.dir, 'workflows');
		fs.mkdirSync(workflowDir, { recursive: true });
		for (const workflow of workflows) {
			fs.writeFileSync(path.join(workflowDir, `${workflow.id}.json`), JSON.stringify(workflow));
		}
		await this.cli('import:workflow', '--separate', `--input=${workflowDir}`);
	}

	async publish(id) {
		await this.cli('publish:workflow', `--id=${id}`);
	}

	/**
	 * `n8n execute --id --rawOutput`: the run data of the execution, the JSON document between
	 * the log lines (n8n may print more lines after it, e.g. on its first run after an install).
	 */
	async execute(id) {
		const stdout = await this.cli('execute', `--id=${id}`, '--rawOutput');
		const start = stdout.indexOf('{\n');
		if (start < 0) throw new Error(`n8n execute printed no JSON: ${stdout.slice(0, 2000)}`);
		return JSON.parse(stdout.slice(start, endOfJson(stdout, start)));
	}

	/** `n8n start` on 127.0.0.1; resolves once the published workflows' webhooks are live. */
	async start() {
		const startedAt = Date.now();
		const log = fs.openSync(this.logPath, 'a');
		this.proc = spawn(n8nBin(), ['start'], { env: this.env(), stdio: ['ignore', log, log], detached: true });
		this.proc.unref();
		await waitFor(
			async () => {
				if (this.proc.exitCode !== null) throw new Error(`n8n start exited; see ${this.logPath}`);
				const ready = await fetch(`${this.url}/healthz/readiness`, { signal: AbortSignal.timeout(2000) });
				return ready.status === 200 && fs.readFileSync(this.logPath, 'utf8').includes('Editor is now accessible');
			},
			'n8n start',
			240_000,
		);
		this.timed('n8n start', startedAt);
	}

	/** Stops `n8n start` (waiting for it to exit) and removes the user folder. */
	async stop() {
		if (this.proc && this.proc.exitCode === null) {
			const exited = new Promise((resolve) => this.proc.once('exit', resolve));
			try {
				process.kill(-this.proc.pid, 'SIGTERM');
			} catch {
				/* already gone */
			}
			await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 30_000))]);
		}
		removeDir(this.dir);
	}

	/** The last lines of n8n's log, for a failure message. */
	tail(lines = 60) {
		try {
			return fs.readFileSync(this.logPath, 'utf8').split('\n').slice(-lines).join('\n');
		} catch {
			return '(no log)';
		}
	}
}

/** The run data of one node in an `n8n execute` result: outputs[i] = items' JSON. */
function nodeOutputs(result, nodeName) {
	const runs = result.data.resultData.runData[nodeName];
	if (!runs) return undefined;
	return runs[0].data.main.map((items) => (items ?? []).map((item) => item.json));
}

/** The index just past the JSON object or array that starts at `start` in `text`. */
function endOfJson(text, start) {
	let depth = 0;
	let inString = false;
	let escaped = false;
	for (let i = start; i < text.length; i++) {
		const c = text[i];
		if (inString) {
			if (escaped) escaped = false;
			else if (c === '\\') escaped = true;
			else if (c === '"') inString = false;
		} else if (c === '"') {
			inString = true;
		} else if (c === '{' || c === '[') {
			depth++;
		} else if ((c === '}' || c === ']') && --depth === 0) {
			return i + 1;
		}
	}
	throw new Error(`n8n execute printed unfinished JSON: ${text.slice(start, start + 2000)}`);
}

module.exports = { N8n, nodeOutputs, PACKAGE_DIR };
