import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseHTML } from 'linkedom';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { capture } from '../support/cli.js';
import { armOrder, EvalAbortedError, makeTasks, planEval, runEval, type EvalResults } from '../../src/eval/index.js';
import { startScriptedModel, type ScriptedModel } from './scripted-model.js';

const SEED = 20261201;
// The harness runs the real pipeline over a real vault for 72 × 2 arms: generous, never a pass condition.
const SLOW = 240_000;

/**
 * Which arm went first in each pair, read off what the model received: the off arm's tool output is
 * the raw evidence. A pair whose balanced arm also shows the raw evidence (a plain file read such as
 * `cat -n f` is shown whole: docs/fidelity.md) has no observable order: `undefined` there.
 */
function observedOrder(model: ScriptedModel, seed: number, pairs: number): (string | undefined)[] {
  const tasks = makeTasks(seed, pairs);
  const firstOf = new Map<number, Record<string, unknown>>();
  const reduced = new Set<number>();
  model.bodies.forEach((b, i) => {
    const t = model.taskOf[i]!;
    if (!firstOf.has(t)) firstOf.set(t, b);
    if (toolContent(b) !== tasks[t]!.evidence) reduced.add(t);
  });
  return tasks
    .slice(0, firstOf.size)
    .map((t) =>
      !reduced.has(t.index) ? undefined : toolContent(firstOf.get(t.index)!) === t.evidence ? 'off' : 'balanced',
    );
}

/** `token-terminator eval` against `url` for `model` over `pairs` pairs, with the further flags `rest`. */
const evalCli = (url: string, model: string, pairs: number, ...rest: string[]) =>
  capture(['eval', '--base-url', url, '--model', model, '--pairs', String(pairs), ...rest]);

const toolContent = (b: Record<string, unknown>): string | undefined =>
  (b['messages'] as { role: string; content?: string }[]).find((m) => m.role === 'tool')!.content;

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'tt-eval-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('eval against an honest model (same answers in both arms)', () => {
  let model: ScriptedModel;
  let results: EvalResults;
  let out: { code: number; out: string; err: string };
  beforeAll(async () => {
    model = await startScriptedModel({ policy: 'honest', seed: SEED, pairs: 72 });
    out = await evalCli(model.url, 'scripted', 72, '--seed', String(SEED), '--out', join(dir, 'honest.json'));
    results = JSON.parse(readFileSync(join(dir, 'honest.json'), 'utf8')) as EvalResults;
  }, SLOW);
  afterAll(() => model.close());

  it('reaches the final look and declares non-inferiority', () => {
    expect(out.code).toBe(0);
    expect(results.status).toBe('complete');
    expect(results.pairs).toHaveLength(72);
    expect(results.final).toMatchObject({
      pairs: 72,
      off_correct: 72,
      balanced_correct: 72,
      b: 0,
      c: 0,
      verdict: 'non-inferior',
    });
    expect(results.checkpoint?.verdict).toBe('withheld');
    expect(results.verdict).toBe('non-inferior');
    expect(out.out).toMatch(/^VERDICT: non-inferior/);
  });

  it('answers recovery calls with the recovery tool and counts them', () => {
    const recovered = results.pairs.filter((p) => p.balanced.recovery_calls > 0);
    expect(recovered.length).toBeGreaterThan(0);
    expect(results.savings.balanced.recovery_calls).toBe(
      results.pairs.reduce((n, p) => n + p.balanced.recovery_calls, 0),
    );
    expect(results.savings.balanced.recovery_tokens).toBeGreaterThan(0);
    expect(results.pairs.every((p) => p.off.recovery_calls === 0 && p.off.receipts_shown === 0)).toBe(true);
    expect(recovered.every((p) => p.balanced.receipts_shown > 0 && p.balanced.requests > 1)).toBe(true);
  });

  it('prints the decision rule before running and with the result, savings after the verdict', () => {
    expect(out.err.indexOf('Decision rule (fixed before the first request)')).toBe(0);
    expect(out.out).toContain('Decision rule (fixed before the first request)');
    expect(out.out.indexOf('VERDICT')).toBeLessThan(out.out.indexOf('Savings (secondary'));
    expect(results.protocol.rule).toContain('exact one-sided McNemar');
  });

  it("feeds the report's answer-quality section: the verdict and the recovery calls shown are the results'", async () => {
    const figures = join(dir, 'figures.json');
    writeFileSync(figures, JSON.stringify({ requests: 1, raw_tokens: 10, final_tokens: 5, sessions: [] }));
    const r = await capture([
      'report',
      '--from',
      figures,
      '--eval',
      join(dir, 'honest.json'),
      '--out',
      join(dir, 'report.html'),
    ]);
    expect(r.code).toBe(0);
    const { document } = parseHTML(readFileSync(join(dir, 'report.html'), 'utf8'));
    const shown = (key: string) => document.querySelector(`[data-key="${key}"]`)?.textContent?.replace(/,/g, '');
    expect(shown('quality.verdict')).toBe('non-inferior');
    expect(Number(shown('quality.savings.balanced.recovery_calls'))).toBe(results.savings.balanced.recovery_calls);
    expect(Number(shown('quality.b'))).toBe(0);
    expect(document.querySelectorAll('#quality svg[role=img]')).toHaveLength(2);
  });

  it('sends each pair in the arm order the seed drew', () => {
    const observed = observedOrder(model, SEED, 72);
    // Every family but the file reads is reduced in the balanced arm, so most orders are observable.
    expect(observed.filter((o) => o !== undefined).length).toBeGreaterThanOrEqual(48);
    expect(observed.map((o, i) => o ?? results.protocol.arm_order[i]![0])).toEqual(
      results.protocol.arm_order.map((o) => o[0]),
    );
    expect(results.pairs.map((p) => p.order)).toEqual(armOrder(SEED, 72));
  });

  it('sends both arms the same prompt, tools and tool call; only the tool output differs', () => {
    const tasks = makeTasks(SEED, 72);
    const firsts = new Map<string, Record<string, unknown>>();
    model.bodies.forEach((b, i) => {
      const messages = b['messages'] as { role: string; content?: string }[];
      const arm =
        messages.find((m) => m.role === 'tool')!.content === tasks[model.taskOf[i]!]!.evidence ? 'off' : 'balanced';
      const key = `${model.taskOf[i]}:${arm}`;
      if (!firsts.has(key) && messages.length === 4) firsts.set(key, b);
    });
    const strip = (b: Record<string, unknown>) => ({
      tools: b['tools'],
      model: b['model'],
      head: (b['messages'] as unknown[]).slice(0, 3),
    });
    // A file read is shown whole in both arms (no balanced body differs): nothing to compare there.
    const compared = tasks.slice(0, 8).filter((t) => firsts.has(`${t.index}:balanced`));
    expect(compared.length).toBeGreaterThanOrEqual(6);
    for (const t of compared)
      expect(strip(firsts.get(`${t.index}:balanced`)!)).toEqual(strip(firsts.get(`${t.index}:off`)!));
  });
});

describe('eval against a model that does not recover receipted evidence', () => {
  let model: ScriptedModel;
  let results: EvalResults;
  beforeAll(async () => {
    model = await startScriptedModel({ policy: 'no-recover', seed: SEED, pairs: 72 });
    results = await runEval({ baseUrl: model.url, model: 'scripted', pairs: 72, seed: SEED });
  }, SLOW);
  afterAll(() => model.close());

  it('declares the balanced arm inferior and stops at the checkpoint', () => {
    expect(results.verdict).toBe('inferior');
    expect(results.status).toBe('stopped for harm');
    expect(results.pairs).toHaveLength(36);
    expect(results.checkpoint!.c).toBe(0);
    expect(results.checkpoint!.b).toBeGreaterThan(5);
    expect(results.checkpoint!.harm_p).toBeLessThanOrEqual(0.025);
    expect(results.final).toBeUndefined();
  });

  it('loses only pairs whose evidence the balanced arm saw behind a receipt', () => {
    for (const p of results.pairs) {
      expect(p.off.correct).toBe(true);
      expect(p.balanced.recovery_calls).toBe(0);
      if (!p.balanced.correct) expect(p.balanced.receipts_shown).toBeGreaterThan(0);
    }
  });
});

describe('eval aborts on provider drift', () => {
  it(
    'rejects a changed system fingerprint mid-run with a clear error and keeps the completed pairs',
    async () => {
      const model = await startScriptedModel({ policy: 'honest', seed: SEED, pairs: 36, driftAfter: 7 });
      try {
        const error = await runEval({ baseUrl: model.url, model: 'scripted', pairs: 36, seed: SEED }).catch(
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(EvalAbortedError);
        const aborted = error as EvalAbortedError;
        expect(aborted.code).toBe('E_EVAL_DRIFT');
        expect(aborted.message).toMatch(
          /provider drift at pair \d+ \((off|balanced) arm, request \d+\): system_fingerprint changed from "fp_before" to "fp_after"/,
        );
        expect(aborted.results.status).toBe('aborted');
        expect(aborted.results.verdict).toBe('withheld');
        expect(aborted.results.pairs.length).toBeGreaterThan(0);
        expect(aborted.results.pairs.length).toBeLessThan(36);
        expect(model.bodies.length).toBe(8);
      } finally {
        await model.close();
      }
    },
    SLOW,
  );

  it(
    'exits non-zero from the CLI and writes the completed pairs',
    async () => {
      const model = await startScriptedModel({ policy: 'honest', seed: SEED, pairs: 36, driftAfter: 3 });
      try {
        const file = join(dir, 'drift.json');
        const r = await evalCli(model.url, 'scripted', 36, '--seed', String(SEED), '--out', file);
        expect(r.code).toBe(1);
        expect(r.err).toContain('eval aborted: provider drift');
        expect((JSON.parse(readFileSync(file, 'utf8')) as EvalResults).status).toBe('aborted');
      } finally {
        await model.close();
      }
    },
    SLOW,
  );
});

describe('eval checkpoint, then the final', () => {
  it(
    'resumes the 36-pair checkpoint into the 72-pair final, sending only the new pairs',
    async () => {
      const model = await startScriptedModel({ policy: 'honest', seed: SEED + 1, pairs: 72 });
      try {
        const checkpoint = join(dir, 'checkpoint.json');
        const first = await evalCli(model.url, 'scripted', 36, '--seed', String(SEED + 1), '--out', checkpoint);
        expect(first.code).toBe(0);
        expect(first.out).toMatch(/^VERDICT: withheld/);
        const sentBefore = model.bodies.length;
        const final = join(dir, 'final.json');
        const second = await evalCli(model.url, 'scripted', 72, '--resume', checkpoint, '--out', final);
        if (second.code !== 0) throw new Error(`resume exited ${second.code}: ${second.err.slice(-600)}`);
        const a = JSON.parse(readFileSync(checkpoint, 'utf8')) as EvalResults;
        const b = JSON.parse(readFileSync(final, 'utf8')) as EvalResults;
        expect(b.protocol.seed).toBe(SEED + 1);
        expect(b.pairs.slice(0, 36)).toEqual(a.pairs);
        expect(b.pairs).toHaveLength(72);
        expect(b.verdict).toBe('non-inferior');
        expect(Math.min(...model.taskOf.slice(sentBefore))).toBe(36);
      } finally {
        await model.close();
      }
    },
    SLOW,
  );

  it(
    'refuses to resume with another model or seed, or against a changed fingerprint',
    async () => {
      const model = await startScriptedModel({ policy: 'honest', seed: SEED + 1, pairs: 72, driftAfter: 0 });
      try {
        const checkpoint = join(dir, 'checkpoint.json');
        const other = await evalCli(model.url, 'other', 72, '--resume', checkpoint);
        expect([other.code, other.err]).toEqual([2, expect.stringContaining('differs from the resumed run')]);
        const seed = await evalCli(model.url, 'scripted', 72, '--seed', '5', '--resume', checkpoint);
        expect([seed.code, seed.err]).toEqual([2, expect.stringContaining('differs from the resumed run')]);
        const drift = await evalCli(model.url, 'scripted', 72, '--resume', checkpoint);
        expect(drift.code).toBe(1);
        expect(drift.err).toContain('system_fingerprint changed from "fp_before" to "fp_after"');
        expect(model.bodies).toHaveLength(1);
      } finally {
        await model.close();
      }
    },
    SLOW,
  );
});

describe('eval through a gateway (--balanced-base-url)', () => {
  it(
    'sends the off arm to the provider and the balanced arm, unreduced, to the gateway, with the same tools',
    async () => {
      const provider = await startScriptedModel({ policy: 'honest', seed: SEED, pairs: 36 });
      const gateway = await startScriptedModel({ policy: 'honest', seed: SEED, pairs: 36 });
      try {
        const r = await runEval({
          baseUrl: provider.url,
          balancedBaseUrl: gateway.url,
          model: 'scripted',
          pairs: 36,
          seed: SEED,
        });
        expect(r.protocol.balanced_via).toBe(`proxy at ${gateway.url}`);
        expect([r.status, r.verdict, r.pairs.length]).toEqual(['complete', 'withheld', 36]);
        const tasks = makeTasks(SEED, 36);
        for (const m of [provider, gateway]) {
          expect([...new Set(m.taskOf)].sort((a, b) => a - b)).toEqual(tasks.map((t) => t.index));
          for (const [i, b] of m.bodies.entries()) {
            expect((b['tools'] as { function: { name: string } }[]).map((t) => t.function.name)).toEqual(['terminal']);
            expect(
              (b['messages'] as { role: string; content?: string }[]).find((x) => x.role === 'tool')!.content,
            ).toBe(tasks[m.taskOf[i]!]!.evidence);
          }
        }
      } finally {
        await provider.close();
        await gateway.close();
      }
    },
    SLOW,
  );

  it(
    'rejects a gateway that serves another model identity than the provider',
    async () => {
      const provider = await startScriptedModel({ policy: 'honest', seed: SEED, pairs: 36 });
      const gateway = await startScriptedModel({ policy: 'honest', seed: SEED, pairs: 36, driftAfter: 0 });
      try {
        const error = await runEval({
          baseUrl: provider.url,
          balancedBaseUrl: gateway.url,
          model: 'scripted',
          pairs: 36,
          seed: SEED,
        }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(EvalAbortedError);
        expect((error as Error).message).toContain('(balanced arm, request 1): system_fingerprint changed');
      } finally {
        await provider.close();
        await gateway.close();
      }
    },
    SLOW,
  );
});

describe('eval protocol', () => {
  it('reproduces tasks and arm order from the seed, and another seed draws another order', () => {
    const a = planEval({ baseUrl: 'http://127.0.0.1:1/v1', model: 'm', pairs: 72, seed: 7 });
    const b = planEval({ baseUrl: 'http://127.0.0.1:1/v1', model: 'm', pairs: 72, seed: 7 });
    const c = planEval({ baseUrl: 'http://127.0.0.1:1/v1', model: 'm', pairs: 72, seed: 8 });
    expect(b.protocol.arm_order).toEqual(a.protocol.arm_order);
    expect(b.protocol.tasks_sha256).toBe(a.protocol.tasks_sha256);
    expect(c.protocol.arm_order).not.toEqual(a.protocol.arm_order);
    expect(c.protocol.tasks_sha256).not.toBe(a.protocol.tasks_sha256);
    const first = a.protocol.arm_order.filter((o) => o[0] === 'off').length;
    expect(first).toBeGreaterThan(20);
    expect(first).toBeLessThan(52);
  });

  it('the first 36 pairs of the final are the checkpoint run', () => {
    const a = planEval({ baseUrl: 'http://x/v1', model: 'm', pairs: 36, seed: 11 });
    const b = planEval({ baseUrl: 'http://x/v1', model: 'm', pairs: 72, seed: 11 });
    expect(b.protocol.arm_order.slice(0, 36)).toEqual(a.protocol.arm_order);
    expect(b.tasks.slice(0, 36)).toEqual(a.tasks);
  });

  it('records the seed it drew when none is given', () => {
    const p = planEval({ baseUrl: 'http://x/v1', model: 'm', pairs: 36 }).protocol;
    expect(Number.isInteger(p.seed)).toBe(true);
    expect(planEval({ baseUrl: 'http://x/v1', model: 'm', pairs: 36, seed: p.seed }).protocol.arm_order).toEqual(
      p.arm_order,
    );
  });

  it.each([
    [['--model', 'm', '--base-url', 'http://x/v1', '--pairs', '50'], /pairs/],
    [['--model', 'm', '--base-url', 'http://x/v1', '--margin', '0.7'], /margin/],
    [['--model', 'm', '--base-url', 'http://x/v1', '--seed', 'abc'], /seed/],
    [['--base-url', 'http://x/v1'], /--model/],
    [['--model', 'm', '--base-url', 'ftp://x'], /base URL must start with http/],
  ])('rejects bad flags %j with a clear error and exit 2', async (argv, message) => {
    const r = await capture(['eval', ...argv]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
  });

  it(
    '--dry-run prints the rule and the tokens a run sends, without a request',
    async () => {
      const r = await evalCli('http://127.0.0.1:9/v1', 'm', 36, '--seed', '3', '--dry-run', '--json');
      expect(r.code).toBe(0);
      const e = JSON.parse(r.out) as {
        off_first_request_tokens: number;
        balanced_first_request_tokens: number;
        min_input_tokens: number;
        protocol: { planned_pairs: number };
      };
      expect(e.protocol.planned_pairs).toBe(36);
      expect(e.balanced_first_request_tokens).toBeLessThan(e.off_first_request_tokens);
      expect(e.min_input_tokens).toBeGreaterThan(36 * e.off_first_request_tokens);
    },
    SLOW,
  );
});
