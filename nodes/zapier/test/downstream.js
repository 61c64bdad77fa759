'use strict';
/**
 * A small downstream API on 127.0.0.1 for the Send Once tests: the API a key store
 * connection points at. It keeps every request (method, url, headers, body text) and answers
 * by script: `script(path, status, body, delayMs)` queues one answer for a path; without one it
 * answers 201 {"id": "<last path segment>-<n>"}.
 */
const http = require('node:http');

async function startDownstream() {
  const got = [];
  const answers = new Map();
  const server = http.createServer((req, res) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => { text += chunk; });
    req.on('end', () => {
      got.push({ method: req.method, path: req.url, headers: req.headers, body: text });
      const n = got.filter((g) => g.path === req.url).length;
      const queued = answers.get(req.url) || [];
      const [status, body, delayMs] = queued.length ? queued.shift()
        : [201, { id: `${req.url.split('/').pop()}-${n}` }, 0];
      setTimeout(() => {
        res.writeHead(status, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify(body));
      }, delayMs);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    got,
    to: (path) => got.filter((g) => g.path === path),
    script(path, status, body, delayMs = 0) {
      if (!answers.has(path)) answers.set(path, []);
      answers.get(path).push([status, body, delayMs]);
    },
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

module.exports = { startDownstream };
