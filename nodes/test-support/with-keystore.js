#!/usr/bin/env node
'use strict';
/**
 * Run a command against a REAL key store started for it, then stop the key store.
 *
 *   node nodes/test-support/with-keystore.js node --test test/
 *
 * Starts `${KEYSTORE_BIN:-<repo>/.venv/bin/keystore} serve` on a free loopback port with a
 * fresh SQLite file in a temporary folder, waits for GET /readyz = 200, creates a client
 * token for the tenant `default`, and runs the command with these variables set:
 *   KEYSTORE_URL    http://127.0.0.1:<port>
 *   KEYSTORE_TOKEN  a client token of tenant `default`
 * The key store is stopped (its whole process group) and the folder removed when the command
 * ends, also when it fails or this process is interrupted. Exits with the command's status.
 * Every wait is bounded: a key store that is not ready in KEYSTORE_START_TIMEOUT seconds
 * (default 60: a cold start on a busy 2-core machine) fails the run.
 */
const { spawn, execFile } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const REPO = path.resolve(__dirname, '..', '..');
const BIN = process.env.KEYSTORE_BIN || path.join(REPO, '.venv', 'bin', 'keystore');
const START_TIMEOUT_MS = Number(process.env.KEYSTORE_START_TIMEOUT || 60) * 1000;
const say = (text) => process.stderr.write(`with-keystore: ${text}\n`);

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function run(args, env) {
  return new Promise((resolve, reject) => {
    execFile(BIN, args, { env, timeout: 60_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`keystore ${args.join(' ')} failed: ${stderr || error.message}`));
      else resolve(stdout.trim());
    });
  });
}

async function waitReady(url, server) {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (server.exitCode !== null) throw new Error(`keystore serve exited with ${server.exitCode}`);
    try {
      const response = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(1000) });
      if (response.status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`keystore serve was not ready within ${START_TIMEOUT_MS / 1000} s`);
}

function stopGroup(child, signal) {
  try {
    process.kill(-child.pid, signal);
  } catch {
    // already gone
  }
}

async function main(command) {
  if (!command.length) throw new Error('usage: with-keystore.js COMMAND [ARGS...]');
  if (!fs.existsSync(BIN)) {
    throw new Error(`no key store at ${BIN}: run scripts/test once (it creates .venv), or set KEYSTORE_BIN`);
  }
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'keystore-node-'));
  const env = { ...process.env, KEYSTORE_DATABASE_URL: `sqlite:///${folder}/keystore.db` };
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const log = fs.openSync(path.join(folder, 'keystore.log'), 'a');
  say(`starting ${BIN} on ${url}`);
  const server = spawn(BIN, ['serve', '--port', String(port), '--workers', '2'],
    { env, stdio: ['ignore', log, log], detached: true });
  const cleanup = () => stopGroup(server, 'SIGKILL');
  process.on('exit', cleanup);
  let status = 1;
  try {
    await waitReady(url, server);
    const token = await run(['token', 'create', '--tenant', 'default', '--role', 'client'], env);
    say('key store ready; running the tests');
    const child = spawn(command[0], command.slice(1), {
      stdio: 'inherit', env: { ...process.env, KEYSTORE_URL: url, KEYSTORE_TOKEN: token },
    });
    for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
    status = await new Promise((resolve) => child.on('exit', (code, sig) => resolve(code ?? (sig ? 1 : 0))));
  } catch (error) {
    say(error.message);
    say(`key store log: ${fs.readFileSync(path.join(folder, 'keystore.log'), 'utf8').slice(-2000)}`);
  } finally {
    // SIGINT is gunicorn's quick shutdown: this key store and its database are thrown away.
    stopGroup(server, 'SIGINT');
    const exited = await Promise.race([
      new Promise((resolve) => server.exitCode !== null ? resolve(true) : server.on('exit', () => resolve(true))),
      new Promise((resolve) => setTimeout(() => resolve(false), 20_000).unref()),
    ]);
    if (!exited) stopGroup(server, 'SIGKILL');
    fs.closeSync(log);
    fs.rmSync(folder, { recursive: true, force: true });
  }
  return status;
}

main(process.argv.slice(2)).then((status) => process.exit(status), (error) => {
  say(error.message);
  process.exit(1);
});
