/**
 * Sight at use and the recoveries it prices (src/replay/sight.ts), on a hand-built session whose
 * counts are worked out by hand in the comments. The pipeline is a stand-in that hides one used
 * word in request 2 (and with it a used line) and one in request 3.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson, createTiktokenCounter } from '../../src/measure/index.js';
import type { TokenCounter } from '../../src/measure/types.js';
import { replaySessions, type RecordedSession, type ReplayFigures } from '../../src/replay/index.js';
import { actionValues } from '../../src/replay/fidelity.js';
import { useCandidates } from '../../src/replay/sight.js';
import { createTerminator, type Terminator } from '../../src/runtime/index.js';
import { advance, type ProviderRequest } from '../../src/step.js';

type Msg = Record<string, unknown>;

const call = (id: string, name: string, args: Msg): Msg => ({
  id,
  type: 'function',
  function: { name, arguments: JSON.stringify(args) },
});

// m3: a file view of 10,000+ chars (a recovery reads 8,000 of it). Its padding holds no word of any action.
const padding = Array.from({ length: 400 }, (_, i) => `# padding ${String(i).padStart(4, '0')} ~~~~~~~~`).join('\n');
const LINE_A = '    result = merge_alpha(left_side, right_side)';
const LINE_B = '    label = "kept_label_value"';
const LINE_C = '    print("already_known_value")';
const m3 = `${padding}\n${LINE_A}\n${LINE_B}\n${LINE_C}\n${padding}`;
// m5: a short failing run (73 chars).
const m5 = 'FAILED tests/test_mod.py::test_merge_beta_case - AssertionError: 41 != 42';

const session: RecordedSession = {
  id: 'sight#0',
  model: 'gpt-4o',
  messages: [
    { role: 'system', content: 'SYS' },
    { role: 'user', content: 'TASK: fix the bug in src/pkg/mod.py' },
    // Its decoded arguments hold LINE_C (quotes unescaped): LINE_C is not learned from an output.
    {
      role: 'assistant',
      content: '',
      tool_calls: [call('c1', 'view', { path: 'src/pkg/mod.py', hint: LINE_C })],
    },
    { role: 'tool', tool_call_id: 'c1', content: m3 },
    {
      role: 'assistant',
      content: 'Replace it.',
      tool_calls: [
        call('c2', 'str_replace', {
          path: 'src/pkg/mod.py',
          old_str: `${LINE_A}\n${LINE_B}`,
          new_str: `    result = merge_beta(left_side)\n${LINE_C}`,
        }),
      ],
    },
    { role: 'tool', tool_call_id: 'c2', content: m5 },
    {
      role: 'assistant',
      content: '',
      tool_calls: [call('c3', 'bash', { command: 'pytest -q tests/test_mod.py -k test_merge_beta_case' })],
    },
    { role: 'tool', tool_call_id: 'c3', content: 'ok' },
    { role: 'assistant', content: 'Done.' },
  ],
};

/** Request k (0-based) as the stand-in pipeline sends it. */
function hide(k: number, messages: Msg[]): Msg[] {
  return messages.map((m, j) => {
    if (k === 1 && j === 3) return { ...m, content: m3.replace('right_side', 'XXXXXXXXXX') };
    if (k === 2 && j === 5) return { ...m, content: m5.replace('test_merge_beta_case', 'TEST') };
    return m;
  });
}

let dir: string;
let counter: TokenCounter;
let figures: ReplayFigures;
let finals: Msg[][];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tt-sight-'));
  counter = createTiktokenCounter();
  const real = await createTerminator({ env: {}, overrides: { dbPath: join(dir, 'v.sqlite3') } });
  finals = [];
  let k = 0;
  const tt: Terminator = {
    ...real,
    reduceToolResult: async (result, context) => ({ value: result, original: result, context, decisions: [] }),
    reduceRequest: async (request: ProviderRequest, context) => {
      const step = { value: request, original: request, context, decisions: [] };
      const messages = hide(k++, request['messages'] as Msg[]);
      finals.push(messages);
      return advance(step, { ...request, messages }, { stage: 'fake_request', kind: 'applied', reason: 'test' });
    },
  };
  const pricing = { name: 'custom', cacheRead: 0.1, cacheWrite: 1.25, minCachePrefixTokens: 0 };
  figures = await replaySessions([session], { terminator: tt, counter, ledger: false, pricing });
  await real.close();
});

afterAll(() => {
  counter.dispose?.();
  rmSync(dir, { recursive: true, force: true });
});

const cp = (s: string): number => [...s].length;
const lcp = (a: string, b: string): number => {
  const [x, y] = [[...a], [...b]];
  let n = 0;
  while (n < x.length && n < y.length && x[n] === y[n]) n++;
  return n;
};
const r4 = (x: number): number => Math.round(x * 1e4) / 1e4;

describe('replay sight at use (computed by hand)', () => {
  it('decodes arguments to their string values and takes words and stripped lines of 20+ chars', () => {
    expect(actionValues('{"a": "x\\ny", "b": ["z"], "c": 3}')).toEqual(['x\ny', 'z']);
    expect(actionValues('ls -la')).toEqual(['ls -la']);
    // "sed" is too short for a word, "95p" gives its number; "short line" is under 20 chars.
    expect(useCandidates([`${LINE_B}\n  short line  \nsed -n 80,95p a/b.py`, 'label'])).toEqual({
      words: ['label', 'kept_label_value', 'short', 'line', '80', '95', 'a/b.py'],
      lines: ['label = "kept_label_value"', 'sed -n 80,95p a/b.py'],
    });
  });

  it('counts used lines: LINE_A and LINE_B of m3 (LINE_C is in m2 decoded), LINE_A hidden in request 2', () => {
    // Request 1 (answered by m2): no earlier output. Request 2 (m4): LINE_A, LINE_B used; the new
    // "result = merge_beta(left_side)" is in no output; LINE_C is in m2's decoded arguments.
    // Request 3 (m6): its command line is in no output.
    expect(figures.fidelity).toMatchObject({ use_lines: 2, use_lines_visible: 1 });
    expect(figures.use_lines_pct).toBe(50);
  });

  it('counts used words: 6 from m3 in request 2 (right_side hidden), 2 from m5 in request 3 (the test name hidden)', () => {
    // Request 2: result, merge_alpha, left_side, right_side, label, kept_label_value (src/pkg/mod.py
    // is in the task; merge_beta in no output; print and already_known_value in m2's arguments).
    // Request 3: tests/test_mod.py and test_merge_beta_case (pytest is in no output).
    expect(figures.fidelity).toMatchObject({ use_words: 8, use_words_visible: 6 });
    expect(figures.use_words_pct).toBe(75);
  });

  it('counts actions with a used line not shown: 1 of 3', () => {
    expect(figures.fidelity).toMatchObject({ use_actions: 3, use_actions_missing_line: 1 });
    expect(figures.actions_missing_use_pct).toBe(33.33);
  });

  it('prices one recovery per action missing an item: the final read from cache, the page and call written', () => {
    expect(figures.simulated_recoveries).toBe(2);
    const size = (ms: Msg[]): number => cp(canonicalJson(ms));
    const raws = [2, 4, 6, 8].map((end) => session.messages.slice(0, end) as Msg[]);
    const costOf = (reqs: Msg[][]): number =>
      reqs.reduce((sum, r, n) => {
        const prefix = n === 0 ? 0 : lcp(canonicalJson(reqs[n - 1]!), canonicalJson(r));
        return sum + 0.1 * prefix + 1.25 * (size(r) - prefix);
      }, 0);
    // Request 2's recovery reads m3 (≥ 8,000 chars: 8,000); request 3's reads m5 (73 chars).
    expect(cp(m3)).toBeGreaterThan(8000);
    expect(cp(m5)).toBe(73);
    const trips = 0.1 * size(finals[1]!) + 1.25 * (8000 + 200) + 0.1 * size(finals[2]!) + 1.25 * (73 + 200);
    expect(figures.effective_cost_with_recoveries_ratio).toBe(r4((costOf(finals) + trips) / costOf(raws)));
    expect(figures.effective_cost_with_recoveries_ratio).toBeGreaterThan(figures.effective_cost_ratio);
    expect(figures.effective_cost_with_recoveries_ratio_anthropic).toBeGreaterThan(
      figures.effective_cost_ratio_anthropic,
    );
    expect(figures.effective_cost_with_recoveries_ratio_openai).toBeGreaterThan(figures.effective_cost_ratio_openai);
  });

  it('the same figures per session, and none missing when nothing is hidden', async () => {
    const { id, ...one } = figures.sessions[0]!;
    expect(id).toBe('sight#0');
    const { peak_rss_mb: _rss, sessions: _s, ...top } = figures;
    expect(one).toEqual(top);
    const plain = await createTerminator({ env: {}, overrides: { dbPath: join(dir, 'p.sqlite3'), mode: 'off' } });
    try {
      const off = await replaySessions([session], { terminator: plain, counter, ledger: false });
      expect(off).toMatchObject({ use_lines_pct: 100, use_words_pct: 100, simulated_recoveries: 0 });
      expect(off.effective_cost_with_recoveries_ratio).toBe(off.effective_cost_ratio);
    } finally {
      await plain.close();
    }
  });
});
