#!/usr/bin/env node
'use strict';
/**
 * Is the package ready to publish? Run after `npm run build`:
 *   node scripts/check-package.js            CI: package.json fields and the packed file list
 *   node scripts/check-package.js --publish  also refuses a repository URL still to be filled in
 *
 * Checks, each failure printed on its own line (exit 1 if any):
 * - package.json has what n8n's community-node rules and its verification ask for: the name
 *   `n8n-nodes-*`, the keyword `n8n-community-node-package`, the `n8n` attribute whose files
 *   the tarball contains, MIT license, description, author name and email, homepage,
 *   repository (git URL), bugs, `files`, no runtime dependencies;
 * - `npm pack --dry-run` lists only what n8n loads or a user reads: dist/**.js, the nodes'
 *   codex files (dist/**.node.json), icons, examples/*.json, README.md, LICENSE.md and
 *   package.json. Anything else is a build leftover (tsconfig.tsbuildinfo, source maps
 *   without their sources, declarations, a copy of package.json in dist/) or a source file.
 */
const { execFileSync } = require('node:child_process');
const path = require('node:path');

const HERE = path.resolve(__dirname, '..');
const SHIPPED = [
	/^package\.json$/,
	/^README\.md$/,
	/^LICENSE\.md$/,
	/^examples\/[\w.-]+\.json$/,
	/^dist\/(credentials|nodes)\/[\w./-]+\.js$/,
	/^dist\/nodes\/[\w/-]+\.node\.json$/,
	/^dist\/(credentials|nodes)\/[\w./-]+\.(svg|png)$/,
];
// A placeholder that only the owner can replace with the public repository's URL.
const PLACEHOLDER = /CHANGE-ME/i;

function packageProblems(pkg, publishing) {
	const problems = [];
	const need = (ok, what) => ok || problems.push(what);
	need(/^(@[a-z0-9-]+\/)?n8n-nodes-[a-z0-9-]+$/.test(pkg.name ?? ''), 'name must be n8n-nodes-* (or @scope/n8n-nodes-*)');
	need((pkg.keywords ?? []).includes('n8n-community-node-package'), 'keywords must include n8n-community-node-package');
	need(pkg.license === 'MIT', 'license must be MIT');
	need(typeof pkg.description === 'string' && pkg.description.length > 20, 'a description is missing');
	need(Boolean(pkg.author?.name) && /^[^@\s]+@[^@\s]+$/.test(pkg.author?.email ?? ''), 'author needs a name and an email');
	need(/^https:\/\//.test(pkg.homepage ?? ''), 'homepage must be an https URL');
	need(pkg.repository?.type === 'git' && /^git\+https:\/\/.+\.git$/.test(pkg.repository?.url ?? ''), 'repository must be {type: git, url: git+https://....git}');
	need(/^https:\/\//.test(pkg.bugs?.url ?? ''), 'bugs.url must be an https URL');
	need(Array.isArray(pkg.files) && pkg.files.includes('dist'), 'files must list dist');
	need(Object.keys(pkg.dependencies ?? {}).length === 0, 'no runtime dependencies allowed');
	need(pkg.n8n?.n8nNodesApiVersion === 1 && (pkg.n8n?.nodes ?? []).length > 0, 'the n8n attribute must list the nodes');
	if (publishing) {
		for (const field of ['homepage', 'repository', 'bugs', 'author']) {
			need(!PLACEHOLDER.test(JSON.stringify(pkg[field])), `${field} still holds a placeholder: set the public repository's URL and the maintainers' address`);
		}
	}
	return problems;
}

function packed() {
	const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: HERE, encoding: 'utf8', timeout: 120_000 });
	return JSON.parse(out)[0].files.map((file) => file.path);
}

function main() {
	const pkg = require(path.join(HERE, 'package.json'));
	const problems = packageProblems(pkg, process.argv.includes('--publish'));
	const files = packed();
	for (const file of files) {
		if (!SHIPPED.some((pattern) => pattern.test(file))) problems.push(`packed but not shipped on purpose (a build leftover?): ${file}`);
	}
	for (const entry of [...(pkg.n8n?.nodes ?? []), ...(pkg.n8n?.credentials ?? [])]) {
		if (!files.includes(entry)) problems.push(`package.json n8n entry missing from the tarball (build first): ${entry}`);
	}
	if (problems.length) {
		for (const problem of problems) console.error(`check-package: ${problem}`);
		process.exit(1);
	}
	console.error(`check-package: ${files.length} files packed, all shipped on purpose`);
}

main();
