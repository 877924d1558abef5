#!/usr/bin/env node
/**
 * The declared peer ranges hold at both ends: for each framework peer of package.json, the lowest
 * version its range allows and the highest one that supports the package's whole Node engine
 * range (the version's own `engines.node` and those of the highest versions its dependencies
 * resolve to, one level down, must admit the engine floor: `@openai/agents` 0.15+ pulls `openai`
 * 7, which needs Node 22, so on a >=20.19 engine its highest is 0.14.x). Then the README setups run
 * as written (.ci/pack-check.mjs --only setups) once with every peer at its lowest and once with
 * every peer at its highest: they must type-check and pass against the scripted model. On a newer
 * Node than the floor, a third run takes the highest versions that support the running Node.
 *
 * Usage: node .ci/peer-ranges.mjs [--no-build] [--list]   (--list: print the versions only)
 * Needs the npm registry (`npm view`, `npm install`).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import semver from 'semver';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const args = new Set(process.argv.slice(2));
const floor = semver.minVersion(pkg.engines.node).version;

/** The framework peers the README setups use (the optional utility peers are loaded by pack-check's other steps). */
const PEERS = ['openai', '@anthropic-ai/sdk', '@openai/agents', 'langchain', '@langchain/core', '@langchain/langgraph'];

const views = new Map();
/** Every published version of `name` in `range`, with its engines and dependencies. */
function view(name, range) {
  const key = `${name}@${range}`;
  if (!views.has(key)) {
    const out = execFileSync('npm', ['view', key, 'version', 'engines', 'dependencies', '--json'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
      maxBuffer: 64 << 20,
    });
    const parsed = JSON.parse(out || '[]');
    views.set(
      key,
      (Array.isArray(parsed) ? parsed : [parsed]).filter(
        (v) => semver.valid(v.version) && !semver.prerelease(v.version),
      ),
    );
  }
  return views.get(key);
}

const admits = (engines, node) => engines?.node === undefined || semver.satisfies(node, engines.node);

/** True when `entry` and the highest version each of its dependencies resolves to admit Node `node`. */
function supportsNode(entry, node) {
  if (!admits(entry.engines, node)) return false;
  for (const [dep, range] of Object.entries(entry.dependencies ?? {})) {
    if (!semver.validRange(range)) continue;
    const top = view(dep, range).sort((a, b) => semver.rcompare(a.version, b.version))[0];
    if (top !== undefined && !admits(top.engines, node)) return false;
  }
  return true;
}
const supportsEngine = (entry) => supportsNode(entry, floor);
const here = process.versions.node;

const lowest = {};
const highest = {};
const highestHere = {};
for (const name of PEERS) {
  const range = pkg.peerDependencies[name];
  const versions = view(name, range).sort((a, b) => semver.compare(a.version, b.version));
  const low = versions.find(supportsEngine);
  const high = versions.findLast(supportsEngine);
  if (low === undefined || high === undefined) {
    console.log(`FAIL ${name} ${range}: no version supports Node ${floor}`);
    process.exit(1);
  }
  lowest[name] = low.version;
  highest[name] = high.version;
  highestHere[name] = versions.findLast((v) => supportsNode(v, here))?.version ?? high.version;
  const skipped = versions.filter((v) => semver.gt(v.version, high.version)).map((v) => v.version);
  console.log(
    `${name} ${range}: lowest ${low.version}, highest on Node ${floor} ${high.version}` +
      (skipped.length > 0
        ? ` (${skipped.length} later version(s) need a newer Node: ${skipped.at(0)}…${skipped.at(-1)})`
        : ''),
  );
}
if (args.has('--list')) process.exit(0);

let failed = 0;
let build = !args.has('--no-build');
const runs = [
  ['lowest', lowest],
  ['highest', highest],
];
if (PEERS.some((n) => highestHere[n] !== highest[n])) runs.push([`highest on Node ${here}`, highestHere]);
for (const [label, set] of runs) {
  console.log(`== README setups with every framework peer at its ${label} version`);
  const peers = Object.entries(set).map(([n, v]) => `${n}@${v}`);
  const r = spawnSync(
    process.execPath,
    [
      join(root, '.ci', 'pack-check.mjs'),
      ...(build ? [] : ['--no-build']),
      '--only',
      'setups',
      '--peers',
      peers.join(','),
    ],
    { cwd: root, stdio: 'inherit' },
  );
  build = false;
  if (r.status !== 0) failed += 1;
}
console.log(failed === 0 ? 'peer ranges hold' : `peer ranges: ${failed} of ${runs.length} runs failed`);
process.exit(failed === 0 ? 0 : 1);
