import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fc, test } from '@fast-check/vitest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { collapseDuplicates } from '../../operators/collapse-duplicates.js';
import { compressToolResult } from '../../operators/compress-tool-result.js';
import { compileRequest } from '../../operators/compile-request.js';
import { createItemMeasures } from '../../src/ledger/item-measures.js';
import { ConfigError } from '../../src/errors.js';
import { createDigests } from '../../src/ledger/digests.js';
import { canonicalJson, createTiktokenCounter } from '../../src/measure/index.js';
import { canonicalJsonNamed } from '../../src/measure/canonical-json.js';
import type { ProviderRequest } from '../../src/step.js';
import { artifactIdFor, createVault, sha256Hex } from '../../src/vault/index.js';
import { runAll } from '../compile/helpers.js';
import { result, runOp } from '../operators/tool-helpers.js';

/**
 * Every SHA-256 node:crypto makes in this process, by the text hashed (strings only): the wrapper is
 * installed on the builtin and synced into its ESM bindings, so it sees the digests of every module
 * (stages, vault, count memo), not only the ledger's.
 */
const digested = new Map<string, number>();
const crypto = createRequire(import.meta.url)('node:crypto') as typeof import('node:crypto');
const originalCreateHash = crypto.createHash;
beforeAll(() => {
  crypto.createHash = ((algorithm: string, options?: import('node:crypto').HashOptions) => {
    const hash = originalCreateHash(algorithm, options);
    if (algorithm !== 'sha256') return hash;
    const update = hash.update.bind(hash) as (data: string | NodeJS.ArrayBufferView, encoding?: never) => typeof hash;
    hash.update = ((data: string | NodeJS.ArrayBufferView, encoding?: never) => {
      if (typeof data === 'string') digested.set(data, (digested.get(data) ?? 0) + 1);
      update(data, encoding);
      return hash;
    }) as typeof hash.update;
    return hash;
  }) as typeof crypto.createHash;
  syncBuiltinESMExports();
});
afterAll(() => {
  crypto.createHash = originalCreateHash;
  syncBuiltinESMExports();
});

const counter = createTiktokenCounter('o200k_base');
afterAll(() => counter.dispose?.());

/** A tool output of `lines` lines, its own per turn. */
const output = (t: number, lines: number): string =>
  Array.from({ length: lines }, (_, i) => `src/m${t}/f${i}.ts:${i}: const v${i} = compute(${t}, ${i});`).join('\n');

/** An agent session's requests: each turn adds one call and its output (every third a long one). */
function session(turns: number): ProviderRequest[] {
  const messages: unknown[] = [
    { role: 'system', content: 'You are a careful coding agent.' },
    { role: 'user', content: 'Fix the build.' },
  ];
  const requests: ProviderRequest[] = [];
  for (let t = 0; t < turns; t++) {
    messages.push({
      role: 'assistant',
      content: `Step ${t}.`,
      tool_calls: [{ id: `c${t}`, type: 'function', function: { name: 'read_file', arguments: `{"n":${t}}` } }],
    });
    messages.push({ role: 'tool', tool_call_id: `c${t}`, content: output(t, t % 3 === 2 ? 400 : 60) });
    requests.push({ model: 'gpt-4o', messages: [...messages] });
  }
  return requests;
}

describe('createDigests', () => {
  it('rejects a bad maxChars or keepFrom with a ConfigError naming the API and the option', () => {
    expect(() => createDigests({ maxChars: 0 })).toThrow(ConfigError);
    expect(() => createDigests({ maxChars: 0 })).toThrow(/createDigests.*maxChars/);
    expect(() => createDigests({ keepFrom: -1 })).toThrow(/createDigests.*keepFrom/);
  });

  test.prop([fc.string({ minLength: 256, maxLength: 2000 })])(
    "gives the vault's digest, hashing a text once whether the same or an equal string comes again",
    (text) => {
      let calls = 0;
      const digests = createDigests({ hash: (t) => (calls++, sha256Hex(t)) });
      expect(digests.of(text)).toBe(sha256Hex(text));
      expect(digests.of(text)).toBe(sha256Hex(text));
      expect(digests.of([...text].join(''))).toBe(sha256Hex(text)); // an equal string built anew
      expect(calls).toBe(1);
      expect(digests.hashed).toBe(1);
    },
  );

  it('names a kept text by its artifact id, and forgets it past its character bound', () => {
    const digests = createDigests({ maxChars: 1000 });
    const a = 'a'.repeat(600);
    const b = 'b'.repeat(600);
    digests.of(a);
    expect(digests.known(artifactIdFor(a))).toEqual({ content: a, sha256: sha256Hex(a) });
    expect(digests.known(`a_${sha256Hex(a)}`)).toEqual({ content: a, sha256: sha256Hex(a) }); // the long id form
    expect(digests.known(artifactIdFor(b))).toBeUndefined();
    digests.of(b); // 1,200 chars: a goes
    expect(digests.known(artifactIdFor(a))).toBeUndefined();
    expect(digests.known(artifactIdFor(b))?.content).toBe(b);
  });
});

describe('canonicalJsonNamed', () => {
  const value = fc.jsonValue({ maxDepth: 3 });
  test.prop([value])('is the compact canonical JSON when it names nothing', (v) => {
    expect(canonicalJsonNamed(v, () => undefined)).toBe(canonicalJson(v, { compact: true }));
  });
  test.prop([value, value])('tells values apart whenever their compact JSON differs', (a, b) => {
    const name = (s: string): string | undefined => (s.length >= 4 ? sha256Hex(s) : undefined);
    const same = canonicalJson(a, { compact: true }) === canonicalJson(b, { compact: true });
    expect(canonicalJsonNamed(a, name) === canonicalJsonNamed(b, name)).toBe(same);
  });
});

describe('one item ledger through the request stages', () => {
  let dir: string;
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('hashes each text once over a session, rebuilt copies and a re-sent request included (real SQLite vault)', async () => {
    dir = mkdtempSync(join(tmpdir(), 'tt-ledger-'));
    const vault = await createVault({ path: join(dir, 'v.sqlite3') });
    let ledgerHashes = 0;
    const digests = createDigests({ hash: (t) => (ledgerHashes++, sha256Hex(t)) });
    const measures = createItemMeasures({ counter, digests });
    const requests = session(24);
    const outputs = requests.at(-1)!['messages'] as { role: string; content: string }[];
    const long = outputs.filter((m) => m.role === 'tool').map((m) => m.content);
    try {
      digested.clear();
      // Reused objects, then the same session rebuilt from JSON (new objects and strings), then the
      // last request sent once more: all through one subscription, as a host's session.
      const rebuilt = requests.map((r) => JSON.parse(JSON.stringify(r)) as ProviderRequest);
      const steps = await runAll(
        (source) =>
          source.pipe(
            collapseDuplicates({ vault, counter, measures }),
            compileRequest({ vault, counter, measures, minVaultChars: 500 }),
          ),
        [...requests, ...rebuilt, rebuilt.at(-1)!].map((r, i) => [r, { sessionId: 's', requestId: `r${i}` }] as const),
      );
      expect(steps).toHaveLength(2 * requests.length + 1);
      // The stages did vault and receipt outputs (else there was nothing to hash twice).
      expect(steps.some((s) => s.decisions.some((d) => (d.artifacts ?? []).length > 0))).toBe(true);
      for (const text of long) expect(digested.get(text) ?? 0).toBe(1);
      const twice = [...digested].filter(([text, n]) => n > 1 && text.length >= 1000);
      expect(twice.map(([text, n]) => [text.slice(0, 40), n])).toEqual([]);
      expect(ledgerHashes).toBeGreaterThanOrEqual(long.length);
    } finally {
      await vault.close();
    }
  });

  it('a tool result compressToolResult vaults and delivers is hashed once (put, read-back and delivery)', async () => {
    dir = mkdtempSync(join(tmpdir(), 'tt-ledger-'));
    const vault = await createVault({ path: join(dir, 'v.sqlite3') });
    try {
      const raw = output(7, 2000);
      digested.clear();
      const [out] = await runOp(compressToolResult({ vault, counter }), [result('search_files', raw)]);
      expect(out!.decisions.at(-1)?.kind).toBe('applied');
      expect(digested.get(raw)).toBe(1);
    } finally {
      await vault.close();
    }
  });
});
