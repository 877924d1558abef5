import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { compressToolResult } from '../../operators/compress-tool-result.js';
import { compactSearchHits, outputShape, searchTerms, unwrapText } from '../../src/compact/shapes.js';
import { codePoints, createTiktokenCounter } from '../../src/measure/index.js';
import { createVault } from '../../src/vault/index.js';
import type { Vault } from '../../src/vault/types.js';
import { expectRecovers, result, runOp } from './tool-helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'tt-shapes-'));
const vault: Vault = await createVault({ path: join(dir, 'vault.sqlite3') });
const counter = createTiktokenCounter('o200k_base');
afterAll(async () => {
  await vault.close();
  counter.dispose?.();
  rmSync(dir, { recursive: true, force: true });
});
const op = () => compressToolResult({ vault, counter });

const REPOS = ['github.com/acme/payments', 'github.com/acme/ledger', 'github.com/acme/gateway'];
const FILES = ['internal/retry/backoff.go', 'pkg/client/http.go', 'cmd/server/main.go', 'internal/queue/worker.go'];

/**
 * A Sourcegraph-style keyword_search result: 30 hits, each a `# repo – path` header and five
 * numbered lines, the middle one holding the query; consecutive hits share repository and path.
 */
function sourcegraphResult(): { text: string; matches: string[]; headers: string[] } {
  const out: string[] = [];
  const matches: string[] = [];
  const headers: string[] = [];
  for (let h = 0; h < 30; h++) {
    const repo = REPOS[Math.floor(h / 10)]!;
    const path = FILES[Math.floor(h / 3) % FILES.length]!;
    const header = `# ${repo} – ${path}`;
    out.push(header);
    headers.push(header);
    const at = 40 + h * 17;
    for (let k = -2; k <= 2; k++) {
      const n = at + k;
      const line =
        k === 0
          ? `${n}: \tdelay := retryBackoff(attempt, cfg.MaxDelay) // hit ${h}`
          : `${n}: \t// context line ${k} of hit ${h}: state = next(state, opts)`;
      out.push(line);
      if (k === 0) matches.push(line);
    }
    out.push('');
  }
  return { text: out.join('\n'), matches, headers };
}

describe('search hits with context, recognised by shape', () => {
  it('an MCP search result (JSON text wrapper, 30 hits) gets a smaller view keeping every match line, path and line number; its receipt recovers exactly', async () => {
    const { text, matches, headers } = sourcegraphResult();
    const raw = JSON.stringify({ text });
    const [out] = await runOp(op(), [result('keyword_search', raw, { query: 'retryBackoff lang:go repo:acme' })]);
    const view = out!.value.content;
    expect(codePoints(view)).toBeLessThan(codePoints(raw) * 0.6);
    expect(counter.count(view)).toBeLessThan(counter.count(raw));
    const lines = new Set(view.split('\n'));
    for (const m of matches) expect(lines, m).toContain(m);
    for (const h of headers) expect(view).toContain(h.split(' – ')[1]!);
    for (const repo of REPOS) expect(view.split('\n').filter((l) => l === `# ${repo}`)).toHaveLength(1);
    expect(view).not.toMatch(/context line -?\d of hit/);
    expect(view).toMatch(/30 match lines in 12 files of 3 repositories; 120 context lines left out/);
    await expectRecovers(vault, view, raw);
  });

  it('an unknown tool name with a content array wrapper is handled by the same shape', async () => {
    const { text, matches } = sourcegraphResult();
    const raw = JSON.stringify({ content: [{ type: 'text', text }] });
    const [out] = await runOp(op(), [result('mcp__code__nls_search', raw, { query: '"retryBackoff"' })]);
    const view = out!.value.content;
    expect(codePoints(view)).toBeLessThan(codePoints(raw));
    for (const m of matches) expect(view).toContain(m);
    await expectRecovers(vault, view, raw);
  });

  it('reads wrappers and shapes, and leaves other JSON alone', () => {
    const { text } = sourcegraphResult();
    expect(unwrapText(JSON.stringify({ text }))).toBe(text);
    expect(unwrapText(JSON.stringify([{ type: 'text', text }]))).toBe(text);
    expect(unwrapText(JSON.stringify({ text, total: 30 }))).toBeUndefined();
    expect(outputShape(text)).toBe('search_hits');
    expect(searchTerms({ query: 'repo:^github\\.com/acme/ "retry backoff" AND lang:go count:50' })).toEqual([
      'retry backoff',
    ]);
    // Without a term, grep's `:` (match) and `-` (context) marks decide.
    const marked = '# repo – a.go\n10- ctx\n11: hit one\n12- ctx\n# repo – b.go\n3- ctx\n4: hit two';
    expect(compactSearchHits(marked)).toBe(
      '[search results: 2 match lines in 2 files of 1 repository; 3 context lines left out]\n# repo\n## a.go\n11: hit one\n## b.go\n4: hit two',
    );
  });

  it('a line-numbered read over the read threshold from an unknown tool gets the bounded view of a file read', async () => {
    const lines = Array.from({ length: 900 }, (_, i) =>
      i === 450
        ? `${i + 1}\t2026-11-30 10:14:07 ERROR payments: charge failed`
        : `${i + 1}\t    value_${i} = compute(value_${i - 1}, ${i})`,
    );
    const raw = lines.join('\n');
    const [out] = await runOp(op(), [result('fetch_file', raw, { path: 'logs/app.log' })]);
    const view = out!.value.content;
    expect(view.split('\n')[0]).toMatch(/^\[file read: 900 lines, lines 1-900, [\d,]+ chars;/);
    expect(view).toContain(lines[450]);
    expect(codePoints(view)).toBeLessThan(codePoints(raw) / 2);
    await expectRecovers(vault, view, raw);
  });
});
