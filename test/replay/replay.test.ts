import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTiktokenCounter } from '../../src/measure/index.js';
import { createReceipt, renderReceipt } from '../../src/receipts/index.js';
import { replaySessions, type RecordedSession, type ReplayFigures } from '../../src/replay/index.js';
import { createTerminator, type Terminator } from '../../src/runtime/index.js';
import { advance } from '../../src/step.js';
import type { TokenCounter } from '../../src/measure/types.js';

// The fixture: one session, three requests (at each assistant message after the first message).
const big = 'line of evidence\n'.repeat(40); // 680 chars
const session: RecordedSession = {
  id: 'fixture#0',
  model: 'gpt-4o',
  messages: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'List files.' },
    {
      role: 'assistant',
      content: 'A1',
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: '{"command": "ls"}' } }],
    },
    { role: 'tool', tool_call_id: 'c1', content: big },
    { role: 'assistant', content: 'Done.' },
    { role: 'user', content: 'More?' },
    { role: 'assistant', content: 'No.' },
  ],
};

// Canonical JSON of each message, written out by hand (sorted keys, ", " and ": ").
const m0 = '{"content": "Be brief.", "role": "system"}';
const m1 = '{"content": "List files.", "role": "user"}';
const m2 =
  '{"content": "A1", "role": "assistant", "tool_calls": [{"function": {"arguments": "{\\"command\\": \\"ls\\"}", "name": "bash"}, "id": "c1", "type": "function"}]}';
const m3raw = `{"content": "${'line of evidence\\n'.repeat(40)}", "role": "tool", "tool_call_id": "c1"}`;
const m4 = '{"content": "Done.", "role": "assistant"}';
const m5 = '{"content": "More?", "role": "user"}';
const arr = (...ms: string[]): string => `[${ms.join(', ')}]`;
const cp = (s: string): number => [...s].length;
const lcp = (a: string, b: string): number => {
  const x = [...a];
  const y = [...b];
  let k = 0;
  while (k < x.length && k < y.length && x[k] === y[k]) k++;
  return k;
};

let dir: string;
let counter: TokenCounter;
let tt: Terminator;
let receipt: string;
let figures: ReplayFigures;
let seenTools: { name: string; args: unknown }[];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tt-replay-'));
  counter = createTiktokenCounter();
  const real = await createTerminator({ env: {}, overrides: { dbPath: join(dir, 'v.sqlite3') } });
  seenTools = [];
  // A deterministic stand-in pipeline, so the figures depend on nothing but their definitions:
  // the tool stream vaults every result ≥ 100 chars behind a receipt; the request stream
  // rewrites the tool message of requests with ≥ 6 messages to "R2" (a mid-message prefix break).
  tt = {
    ...real,
    reduceToolResult: async (result, context) => {
      seenTools.push({ name: result.name, args: result.args });
      const put = await real.vault.put({
        content: result.content,
        toolName: result.name,
        sessionId: context.sessionId,
      });
      receipt = renderReceipt(createReceipt(put.artifactId, result.name, put.chars, put.sha256));
      const step = { value: result, original: result, context, decisions: [] };
      return advance(
        step,
        { ...result, content: receipt },
        { stage: 'fake_tool', kind: 'applied', reason: 'test', savedChars: put.chars - cp(receipt) },
      );
    },
    reduceRequest: async (request, context) => {
      const step = { value: request, original: request, context, decisions: [] };
      const messages = request['messages'] as Record<string, unknown>[];
      if (messages.length < 6) return step;
      const changed = messages.map((m) => (m['role'] === 'tool' ? { ...m, content: 'R2' } : m));
      return advance(
        step,
        { ...request, messages: changed },
        { stage: 'fake_request', kind: 'applied', reason: 'test', savedChars: 1 },
      );
    },
  };
  let t = 0;
  // The cost formula without a minimum prefix (these requests are far below the built-ins' 1,024 tokens).
  const pricing = { name: 'custom', cacheRead: 0.1, cacheWrite: 1, minCachePrefixTokens: 0 };
  figures = await replaySessions([session], {
    terminator: tt,
    counter,
    ledger: join(dir, 'ledger.sqlite3'),
    now: () => t++,
    pricing,
  });
  await real.close();
});

afterAll(() => {
  counter.dispose?.();
  rmSync(dir, { recursive: true, force: true });
});

describe('replay figures (computed by hand)', () => {
  it('matches every key on a three-request fixture', () => {
    const m3final = `{"content": "${receipt}", "role": "tool", "tool_call_id": "c1"}`;
    const m3r2 = '{"content": "R2", "role": "tool", "tool_call_id": "c1"}';
    const raw = [arr(m0, m1), arr(m0, m1, m2, m3raw), arr(m0, m1, m2, m3raw, m4, m5)];
    const fin = [arr(m0, m1), arr(m0, m1, m2, m3final), arr(m0, m1, m2, m3r2, m4, m5)];
    const rawPrefix = [0, lcp(raw[0]!, raw[1]!), lcp(raw[1]!, raw[2]!)];
    const finPrefix = [0, lcp(fin[0]!, fin[1]!), lcp(fin[1]!, fin[2]!)];
    // Sanity of the hand-written prefixes: request 2 extends request 1; request 3's final one
    // breaks inside the tool message, right after `{"content": "`.
    expect(rawPrefix[1]).toBe(cp(raw[0]!) - 1);
    expect(finPrefix[2]).toBe(cp(arr(m0, m1, m2)) - 1 + 2 + cp('{"content": "'));
    const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
    const rawChars = sum(raw.map(cp));
    const finalChars = sum(fin.map(cp));
    const rawTokens = sum(raw.map((s) => counter.count(s)));
    const finalTokens = sum(fin.map((s) => counter.count(s)));
    const cost = (sizes: number[], prefixes: number[]): number =>
      sum(sizes.map((n, i) => n - prefixes[i]! + 0.1 * prefixes[i]!));
    const costRaw = cost(raw.map(cp), rawPrefix);
    const costFinal = cost(fin.map(cp), finPrefix);
    const r4 = (x: number): number => Math.round(x * 1e4) / 1e4;
    const r3 = (x: number): number => Math.round(x * 1e3) / 1e3;
    // Clock: +1 ms per reading, two readings per timed section → each section 1 ms; request 2
    // also carries the tool result that preceded it: [1, 2, 1] → p50 1, p95 1.9, total 4.
    const expected = {
      requests: 3,
      raw_chars: rawChars,
      final_chars: finalChars,
      raw_tokens: rawTokens,
      final_tokens: finalTokens,
      reduction_pct: Math.round(((rawTokens - finalTokens) / rawTokens) * 1e4) / 1e2,
      receipts: 1,
      recovered_exact: 1,
      recovery_failures: 0,
      cache_prefix_ratio_raw: r4(sum(rawPrefix) / rawChars),
      cache_prefix_ratio_final: r4(sum(finPrefix) / finalChars),
      effective_cost_raw: r3(costRaw),
      effective_cost_final: r3(costFinal),
      effective_cost_ratio: r4(costFinal / costRaw),
      p50_ms: 1,
      p95_ms: 1.9,
      total_ms: 4,
      // Fidelity: the fake stages keep the prefix (m0, m1) and m2's arguments (checked in
      // requests 2 and 3); no output reaches 1,000 chars, so nothing to check for diagnostics or grounding.
      task_visible_pct: 100,
      actions_visible_pct: 100,
      diagnostics_visible_pct: 100,
      grounding_pct: 100,
      // Item serialization: request 1 → 2 keeps all of [m0, m1]; 2 → 3 breaks inside m3.
      prefix_reuse: r4(
        (cp(m0) + cp(m1) + cp(m0) + cp(m1) + cp(m2) + lcp(m3final, m3r2)) /
          (cp(m0) + cp(m1) + cp(m0) + cp(m1) + cp(m2) + cp(m3final)),
      ),
      pricing_profile: 'custom',
      // Below the built-ins' minimum nothing is cached: cost = size.
      effective_cost_ratio_openai: r4(finalChars / rawChars),
      effective_cost_ratio_anthropic: r4(finalChars / rawChars),
      // Sight at use: only m2 is an action ("ls": no word or line), so nothing is used or missing.
      use_lines_pct: 100,
      use_words_pct: 100,
      actions_missing_use_pct: 0,
      simulated_recoveries: 0,
      effective_cost_with_recoveries_ratio: r4(costFinal / costRaw),
      effective_cost_with_recoveries_ratio_openai: r4(finalChars / rawChars),
      effective_cost_with_recoveries_ratio_anthropic: r4(finalChars / rawChars),
      fidelity: {
        requests: 3,
        tasks_visible: 3,
        actions_checked: 2,
        actions_visible: 2,
        diagnostic_lines: 0,
        diagnostic_lines_visible: 0,
        grounding_strings: 0,
        grounding_strings_visible: 0,
        use_actions: 1,
        use_actions_missing_line: 0,
        use_lines: 0,
        use_lines_visible: 0,
        use_words: 0,
        use_words_visible: 0,
        simulated_recoveries: 0,
      },
    };
    const { peak_rss_mb, sessions, ...top } = figures;
    expect(top).toEqual(expected);
    expect(peak_rss_mb).toBeGreaterThan(0);
    expect(sessions).toEqual([{ id: 'fixture#0', ...expected }]);
    expect(Object.keys(figures).sort()).toEqual([...Object.keys(expected), 'peak_rss_mb', 'sessions'].sort());
  });

  it('sends tool results under their canonical name with the parsed call arguments', () => {
    expect(seenTools).toEqual([{ name: 'terminal', args: { command: 'ls' } }]);
  });

  it('counts a receipt whose artifact does not recover as a failure', async () => {
    const broken: Terminator = {
      ...tt,
      reduceToolResult: async (result, context) => {
        const fake = renderReceipt(createReceipt(`a_${'0'.repeat(32)}`, result.name, result.content.length));
        const step = { value: result, original: result, context, decisions: [] };
        return advance(step, { ...result, content: fake }, { stage: 'fake_tool', kind: 'applied', reason: 'test' });
      },
      reduceRequest: async (request, context) => ({ value: request, original: request, context, decisions: [] }),
    };
    const real = await createTerminator({ env: {}, overrides: { dbPath: join(dir, 'broken.sqlite3') } });
    try {
      const f = await replaySessions([session], {
        terminator: { ...broken, vault: real.vault },
        counter,
        ledger: false,
      });
      expect(f).toMatchObject({ receipts: 2, recovered_exact: 0, recovery_failures: 2 });
    } finally {
      await real.close();
    }
  });
});

describe('replay with the real pipeline', () => {
  it('in mode off changes nothing: final equals raw and the prefix ratios are equal', async () => {
    const f = await replaySessions([session], { mode: 'off', env: {}, counter, ledger: false });
    expect(f.final_chars).toBe(f.raw_chars);
    expect(f.final_tokens).toBe(f.raw_tokens);
    expect(f.reduction_pct).toBe(0);
    expect(f.cache_prefix_ratio_final).toBe(f.cache_prefix_ratio_raw);
    expect(f.effective_cost_ratio).toBe(1);
  });

  it('writes one dump line per request with the complete final request', async () => {
    const dump = join(dir, 'dump.jsonl');
    await replaySessions([session], { mode: 'off', env: {}, counter, ledger: false, dump });
    const lines = readFileSync(dump, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { session: string; index: number; final: { messages: unknown[]; model: string } });
    expect(lines.map((l) => [l.session, l.index, l.final.messages.length, l.final.model])).toEqual([
      ['fixture#0', 0, 2, 'gpt-4o'],
      ['fixture#0', 1, 4, 'gpt-4o'],
      ['fixture#0', 2, 6, 'gpt-4o'],
    ]);
  });

  it('fails loudly on a vault that cannot be opened (a replay must not measure a pass-through), creating no dump', async () => {
    const db = join(dir, 'not-a-vault.sqlite3');
    writeFileSync(db, 'garbage, not a database\n'.repeat(100));
    const dump = join(dir, 'unopened-dump.jsonl');
    await expect(
      replaySessions([session], { mode: 'balanced', env: {}, counter, ledger: false, db, dump }),
    ).rejects.toMatchObject({ code: 'E_VAULT_OPEN', reason: 'SQLITE_NOTADB' });
    expect(existsSync(dump)).toBe(false);
  });

  it('creates the dump 0600 even under umask 0, and narrows an existing 0644 file to 0600', async () => {
    const fresh = join(dir, 'private-dump.jsonl');
    const existing = join(dir, 'existing-dump.jsonl');
    writeFileSync(existing, 'stale line\n', { mode: 0o644 });
    expect(statSync(existing).mode & 0o777).toBe(0o644);
    const old = process.umask(0);
    try {
      await replaySessions([session], { mode: 'off', env: {}, counter, ledger: false, dump: fresh });
      await replaySessions([session], { mode: 'off', env: {}, counter, ledger: false, dump: existing });
    } finally {
      process.umask(old);
    }
    expect((statSync(fresh).mode & 0o777).toString(8)).toBe('600');
    expect((statSync(existing).mode & 0o777).toString(8)).toBe('600');
    expect(readFileSync(existing, 'utf8')).not.toContain('stale line');
    expect(readFileSync(existing, 'utf8').trim().split('\n')).toHaveLength(3);
  });
});
