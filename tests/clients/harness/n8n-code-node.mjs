// Runs a snippet the way n8n's Code node runs JavaScript in "Run Once for All Items" mode,
// so the snippet file is tested exactly as a user pastes it.
//
//   node n8n-code-node.mjs SNIPPET.js < {"items": [{...json...}], "env": {...} | null}
//   -> stdout {"ok": true, "items": [...]} or {"ok": false, "error": "message"}
//
// What is reproduced from n8n (packages/@n8n/task-runner, js-task-runner.ts):
// - the code is the body of `module.exports = async function VmCodeWrapper() {CODE\n}()`,
//   run with node:vm in a fresh context, so top-level `await` and `return` work and `this`
//   is the context object;
// - the context has `$input` (all(), first(), last()), `items`, `$json` (first item),
//   `$env` (throws on access when env access is blocked: "env": null), `helpers` with
//   `httpRequest`, `console`, and the timers n8n exposes; no `fetch` and no `require`;
// - the returned items are normalised like n8n does: an item without `json` is wrapped.
//
// `helpers.httpRequest` is a small, faithful stand-in for n8n's helper (request-helper-
// functions.ts: httpRequest -> convertN8nRequestToAxios -> axios), built on Node's fetch with
// n8n's option names: url, method (default GET), headers, qs, body (a non-empty object is
// sent as JSON), json (adds Accept: application/json), timeout (ms), returnFullResponse
// ({body, headers, statusCode, statusMessage}, header names lower-case),
// ignoreHttpStatusErrors, disableFollowRedirect. A User-Agent of "n8n" is set. Response bodies
// are parsed as JSON when they are JSON, else left as text (axios' default). Errors as n8n
// raises them from axios: a non-2xx status without ignoreHttpStatusErrors throws an
// AxiosError "Request failed with status code N" with `.status`, `.code` ERR_BAD_REQUEST
// (4xx) / ERR_BAD_RESPONSE (5xx) and `.response` {status, statusText, headers, data}; a
// network failure throws with the system `.code` (ECONNREFUSED, ...); a timeout throws with
// `.code` ECONNABORTED and "timeout of N ms exceeded".
import { readFileSync } from 'node:fs';
import vm from 'node:vm';

function axiosError(message, code, response) {
  const error = new Error(message);
  error.name = 'AxiosError';
  error.isAxiosError = true;
  error.code = code;
  if (response) {
    error.response = response;
    error.status = response.status;
  }
  return error;
}

async function httpRequest(options) {
  const method = (options.method || 'GET').toUpperCase();
  const url = new URL(options.url, options.baseURL);
  for (const [name, value] of Object.entries(options.qs || {})) {
    if (value !== undefined) url.searchParams.append(name, String(value));
  }
  const headers = {};
  for (const [name, value] of Object.entries(options.headers || {})) {
    headers[name.toLowerCase()] = String(value);
  }
  if (options.json && !headers.accept) headers.accept = 'application/json';
  if (!headers['user-agent']) headers['user-agent'] = 'n8n';
  let body;
  const b = options.body;
  const empty = b === undefined || b === null || (typeof b === 'object' && Object.keys(b).length === 0);
  if (!empty && method !== 'GET' && method !== 'HEAD') {
    if (typeof b === 'string') {
      body = b;
    } else if (typeof b === 'object' && (Array.isArray(b) || Object.getPrototypeOf(b) === Object.prototype || Object.getPrototypeOf(b) === null || b.constructor?.name === 'Object')) {
      body = JSON.stringify(b);
      if (!headers['content-type']) headers['content-type'] = 'application/json';
    } else {
      throw new Error('this stand-in sends strings and plain objects only');
    }
  }
  let res;
  try {
    res = await fetch(url, {
      method, headers, body,
      redirect: options.disableFollowRedirect ? 'manual' : 'follow',
      signal: options.timeout ? AbortSignal.timeout(options.timeout) : undefined,
    });
  } catch (error) {
    if (error.name === 'TimeoutError') {
      throw axiosError(`timeout of ${options.timeout}ms exceeded`, 'ECONNABORTED');
    }
    const cause = error.cause || {};
    throw axiosError(cause.message || error.message, cause.code || 'ERR_NETWORK');
  }
  const text = await res.text();
  let data = text;
  if (text) {
    try { data = JSON.parse(text); } catch (e) { /* axios keeps non-JSON text as is */ }
  }
  const responseHeaders = Object.fromEntries(res.headers.entries());
  if (!options.ignoreHttpStatusErrors && (res.status < 200 || res.status >= 300)) {
    throw axiosError(`Request failed with status code ${res.status}`,
      res.status >= 500 ? 'ERR_BAD_RESPONSE' : 'ERR_BAD_REQUEST',
      { status: res.status, statusText: res.statusText, headers: responseHeaders, data });
  }
  if (options.returnFullResponse) {
    return { body: data, headers: responseHeaders, statusCode: res.status, statusMessage: res.statusText };
  }
  return data;
}

async function main() {
  const code = readFileSync(process.argv[2], 'utf8');
  const input = JSON.parse(readFileSync(0, 'utf8'));
  const items = input.items.map((json) => ({ json }));
  const env = input.env === null
    ? new Proxy({}, { get() { throw new Error('access to env vars denied'); } })
    : input.env;
  const logs = [];
  const context = vm.createContext({
    __isExecutionContext: true,
    $input: { all: () => items, first: () => items[0], last: () => items[items.length - 1] },
    items,
    $json: items[0]?.json,
    $env: env,
    helpers: { httpRequest },
    console: { log: (...args) => logs.push(args) },
    Buffer, setTimeout, setInterval, setImmediate, clearTimeout, clearInterval,
    clearImmediate, btoa, atob, TextDecoder, TextEncoder, FormData,
  });
  const wrapped = [
    'globalThis.global = globalThis',
    'var module = { exports: {} }',
    `module.exports = async function VmCodeWrapper() {${code}\n}()`,
  ].join('; ');
  try {
    const result = await vm.runInContext(wrapped, context, { timeout: 60000 });
    const out = (result === null ? [] : result).map((item) => ('json' in item ? item : { json: item }));
    process.stdout.write(JSON.stringify({ ok: true, items: out, logs }));
  } catch (error) {
    process.stdout.write(JSON.stringify({ ok: false, error: String(error.message), logs }));
  }
}

await main();
