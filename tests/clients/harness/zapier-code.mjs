// Runs a snippet the way "Code by Zapier" runs JavaScript, so the snippet file is tested
// exactly as a user pastes it.
//
//   node zapier-code.mjs SNIPPET.js < {"inputData": {"field": "string", ...}}
//   -> stdout {"ok": true, "output": ...} or {"ok": false, "error": "message"}
//
// As Zapier documents it: the code is wrapped in an async function (so `await` works
// throughout), `inputData` holds the Input Data fields, every value a string, `fetch` is
// available, and the step's result is what the code assigns to `output` (or returns): a JSON
// object or an array of them. A thrown error fails the step (Zapier then shows it, and
// Autoreplay may run the step again).
import { readFileSync } from 'node:fs';

const AsyncFunction = (async () => {}).constructor;

async function main() {
  const code = readFileSync(process.argv[2], 'utf8');
  const { inputData } = JSON.parse(readFileSync(0, 'utf8'));
  for (const [name, value] of Object.entries(inputData)) {
    if (typeof value !== 'string') throw new Error(`Zapier passes strings only: ${name}`);
  }
  const step = new AsyncFunction('inputData', 'fetch', `let output;\n${code}\nreturn output;`);
  try {
    const output = await step(Object.freeze({ ...inputData }), fetch);
    const items = Array.isArray(output) ? output : [output];
    if (!items.every((o) => o !== null && typeof o === 'object' && !Array.isArray(o))) {
      throw new Error('output must be an object or an array of objects');
    }
    process.stdout.write(JSON.stringify({ ok: true, output: JSON.parse(JSON.stringify(output)) }));
  } catch (error) {
    process.stdout.write(JSON.stringify({ ok: false, error: String(error.message) }));
  }
}

await main();
