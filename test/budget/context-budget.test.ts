import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { firstValueFrom, from } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { capOutputBudget, type CapOutputBudgetOptions } from '../../operators/cap-output-budget.js';
import { contextBudget, type BudgetCounter, type BudgetMeasurement } from '../../src/budget/index.js';
import { loadConfig } from '../../src/config/index.js';
import { ConfigError } from '../../src/errors.js';
import { createTerminator } from '../../src/runtime/index.js';
import { STAGES } from '../../src/stages.js';
import { createStep, type ProviderRequest, type Route, type Step } from '../../src/step.js';

const request: ProviderRequest = {
  model: 'm',
  messages: [
    { role: 'system', content: 's' },
    { role: 'user', content: 'u' },
  ],
};
const exact = (p: number): BudgetCounter => ({ name: 'fake', exact: true, countRequest: () => Promise.resolve(p) });
const route: Route = { model: 'm', contextWindow: 128_000 };

async function run(options: CapOutputBudgetOptions, r: Route | undefined = route): Promise<Step<ProviderRequest>> {
  const step = createStep(request, { sessionId: 's', ...(r !== undefined && { route: r }) });
  return firstValueFrom(from([step]).pipe(capOutputBudget(options)));
}
/** The budget reports (the stage's other `measured` decision is the unknown-model hint). */
const reports = (step: Step<ProviderRequest>) =>
  step.decisions
    .filter((d) => d.stage === STAGES.capOutputBudget && d.kind === 'measured' && d.reason.startsWith('context budget'))
    .map((d) => d.reason);

describe('the context budget report (TOKEN_TERMINATOR_CONTEXT_LIMIT_TOKENS, _OUTPUT_RESERVE_TOKENS, _TOKEN_SAFETY_MARGIN)', () => {
  it('is off at limit 0 (the default): no report, the same cap', async () => {
    const off = await run({ counter: exact(20_000) });
    expect(reports(off)).toEqual([]);
    const on = await run({ counter: exact(20_000), contextLimitTokens: 32_000 });
    expect(on.value).toEqual(off.value);
    expect(on.value['max_completion_tokens']).toBe(108_000);
  });

  it('reports limit − reserve − margin and what the prompt leaves, in the decision and the measurement', async () => {
    const seen: BudgetMeasurement[] = [];
    const step = await run({ counter: exact(20_000), contextLimitTokens: 32_000, onMeasure: (m) => seen.push(m) });
    expect(reports(step)).toEqual([
      'context budget: prompt 20000 of 27392 usable tokens (limit 32000 − output reserve 4096 − safety margin 512), 7392 left',
    ]);
    expect(seen[0]!.contextBudget).toEqual({ limit: 32_000, usable: 27_392, prompt: 20_000, headroom: 7_392 });
  });

  it('the output reserve and the safety margin each move the usable budget', async () => {
    const usable = async (o: CapOutputBudgetOptions) => {
      const seen: BudgetMeasurement[] = [];
      await run({ counter: exact(1000), contextLimitTokens: 32_000, onMeasure: (m) => seen.push(m), ...o });
      return seen[0]!.contextBudget!.usable;
    };
    expect(await usable({})).toBe(27_392);
    expect(await usable({ outputReserveTokens: 8000 })).toBe(23_488);
    expect(await usable({ tokenSafetyMargin: 0 })).toBe(27_904);
    expect(contextBudget(32_000, 8000, 0, 1000)).toEqual({
      limit: 32_000,
      usable: 24_000,
      prompt: 1000,
      headroom: 23_000,
    });
  });

  it('an over-budget prompt is reported, never truncated', async () => {
    const step = await run({ counter: exact(30_000), contextLimitTokens: 32_000 });
    expect(reports(step)[0]).toMatch(/2608 over \(not truncated\)$/);
    expect(step.value['messages']).toEqual(request['messages']);
  });

  it('reports even when no window is known to cap against (the request passes unchanged)', async () => {
    const step = await run({ counter: exact(5000), contextLimitTokens: 32_000 }, { model: 'm' });
    expect(reports(step)).toEqual([expect.stringContaining('prompt 5000 of 27392 usable')]);
    expect(step.decisions.at(-1)).toMatchObject({ kind: 'skipped', reason: 'no budgeting window' });
    expect(step.value).toEqual(request);
  });

  it('a limit that leaves no room after reserve and margin is a startup error', () => {
    expect(() => capOutputBudget({ contextLimitTokens: 4608 })).toThrow(ConfigError);
    expect(() => capOutputBudget({ contextLimitTokens: 4608 })).toThrow(
      'capOutputBudget: options.outputReserveTokens + options.tokenSafetyMargin (4096 + 512) must be below ' +
        'options.contextLimitTokens (4608) (TOKEN_TERMINATOR_OUTPUT_RESERVE_TOKENS, _TOKEN_SAFETY_MARGIN, _CONTEXT_LIMIT_TOKENS)',
    );
    expect(() => capOutputBudget({ contextLimitTokens: 4609 })).not.toThrow();
    expect(() => loadConfig({ env: { HOME: '/home/x', TOKEN_TERMINATOR_CONTEXT_LIMIT_TOKENS: '4000' } })).toThrow(
      'TOKEN_TERMINATOR_OUTPUT_RESERVE_TOKENS + TOKEN_TERMINATOR_TOKEN_SAFETY_MARGIN (4096 + 512) must be below ' +
        'TOKEN_TERMINATOR_CONTEXT_LIMIT_TOKENS (4000)',
    );
  });
});

describe('createTerminator wires the context budget from the environment', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'tt-context-budget-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const chat = { model: 'gpt-4o', messages: [{ role: 'user', content: 'hello there' }] };

  it('default: no budget report', async () => {
    await using tt = await createTerminator({ env: {}, overrides: { dbPath: join(dir, 'v.sqlite3') } });
    const out = await tt.reduceRequest(chat, { sessionId: 's', requestId: 'r1' });
    expect(reports(out)).toEqual([]);
  });

  it('the three variables set the report the budget stage adds', async () => {
    await using tt = await createTerminator({
      env: {
        TOKEN_TERMINATOR_CONTEXT_LIMIT_TOKENS: '50000',
        TOKEN_TERMINATOR_OUTPUT_RESERVE_TOKENS: '1000',
        TOKEN_TERMINATOR_TOKEN_SAFETY_MARGIN: '24',
      },
      overrides: { dbPath: join(dir, 'v.sqlite3') },
    });
    const out = await tt.reduceRequest(chat, { sessionId: 's', requestId: 'r1' });
    expect(reports(out)).toEqual([
      expect.stringMatching(
        /^context budget: prompt \d+ of 48976 usable tokens \(limit 50000 − output reserve 1000 − safety margin 24\), \d+ left$/,
      ),
    ]);
    expect(out.value).toMatchObject(chat);
  });
});
