'use strict';
/**
 * A proxy in front of a REAL key store that loses answers on demand, for the packages' tests
 * of a claim whose answer was lost: every request is forwarded as it is; `dropNext(path, n)`
 * makes the next n requests to `path` reach the key store, be applied there, and then get no
 * answer at all (the proxy waits for the key store's answer and destroys the client's
 * connection instead of passing it on), as when a key store worker is killed after its commit.
 * `seen[path]` counts the requests that reached the proxy, `bodies[path]` keeps their JSON
 * bodies (null for none). It listens on 127.0.0.1 only.
 *
 *   const proxy = await startDropProxy(ks.url);
 *   proxy.dropNext('/v1/claim');   // the next claim lands, its answer is lost
 *   ... point the client at proxy.url ...
 *   await proxy.close();
 */
const http = require('node:http');

async function startDropProxy(upstream) {
  const drops = new Map();
  const seen = {};
  const bodies = {};
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', async () => {
      const path = req.url.split('?')[0];
      seen[path] = (seen[path] || 0) + 1;
      const raw = Buffer.concat(chunks).toString('utf8');
      (bodies[path] = bodies[path] || []).push(raw ? JSON.parse(raw) : null);
      const drop = (drops.get(path) || 0) > 0;
      if (drop) drops.set(path, drops.get(path) - 1);
      const headers = { ...req.headers };
      delete headers.host;
      delete headers['content-length'];
      let answer;
      try {
        answer = await fetch(upstream.replace(/\/+$/, '') + req.url, {
          method: req.method,
          headers,
          body: chunks.length ? Buffer.concat(chunks) : undefined,
          signal: AbortSignal.timeout(60_000),
        });
      } catch {
        res.destroy();
        return;
      }
      const body = Buffer.from(await answer.arrayBuffer());
      if (drop) {
        res.destroy(); // applied by the key store; its answer never reaches the client
        return;
      }
      const out = {};
      answer.headers.forEach((value, name) => {
        if (!['content-length', 'transfer-encoding', 'connection', 'keep-alive'].includes(name)) out[name] = value;
      });
      res.writeHead(answer.status, { ...out, 'content-length': body.length });
      res.end(body);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    seen,
    bodies,
    dropNext(path, n = 1) { drops.set(path, (drops.get(path) || 0) + n); },
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

module.exports = { startDropProxy };
