import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { capOutputBudget } from '../../operators/cap-output-budget.js';
import {
  BUILT_IN_MODEL_LIMITS,
  canonicalModelId,
  createModelLimits,
  lookupModelLimits,
  type BudgetCounter,
} from '../../src/budget/index.js';
import { modelLimitsHint } from '../../src/budget/model-limits.js';
import { loadConfig } from '../../src/config/index.js';
import { ConfigError } from '../../src/errors.js';
import type { Route } from '../../src/step.js';
import { deepFreeze } from '../../src/testing/index.js';
import { runCap as run } from './helpers.js';

const exactCounter = (p: number): BudgetCounter => ({
  name: 'fake',
  exact: true,
  countRequest: () => Promise.resolve(p),
});

describe('model limits table (unit)', () => {
  it('finds provider-qualified ids, dated snapshots and platform spellings', () => {
    const gpt4o = { contextWindow: 128_000, maxOutputTokens: 16_384 };
    const sonnet = { contextWindow: 200_000, maxOutputTokens: 64_000 };
    const spellings: [typeof gpt4o, string[]][] = [
      [
        gpt4o,
        [
          'gpt-4o',
          'openai/gpt-4o',
          'openai:gpt-4o',
          'GPT-4o',
          'gpt-4o-2024-08-06',
          'gpt-4o-2024-11-20',
          'azure_openai:gpt-4o',
          'openrouter/openai/gpt-4o',
        ],
      ],
      [
        sonnet,
        [
          'claude-sonnet-4-5',
          'claude-sonnet-4-5-20250929',
          'anthropic/claude-sonnet-4-5',
          'anthropic:claude-sonnet-4-5',
          'anthropic/claude-sonnet-4.5',
          'us.anthropic.claude-sonnet-4-5-20250929-v1:0',
          'claude-sonnet-4-5@20250929',
        ],
      ],
    ];
    for (const [limits, ids] of spellings) for (const id of ids) expect(lookupModelLimits(id), id).toEqual(limits);
    expect(lookupModelLimits('gpt-4o-2024-05-13')?.maxOutputTokens).toBe(4096);
    expect(lookupModelLimits('claude-opus-4-1-20250805')?.maxOutputTokens).toBe(32_000);
    expect(lookupModelLimits('claude-3-5-haiku-latest')?.maxOutputTokens).toBe(8192);
    expect(lookupModelLimits('models/gemini-2.5-pro')?.maxOutputTokens).toBe(65_536);
    expect(lookupModelLimits('gemini-2.5-flash-preview-05-20')?.maxOutputTokens).toBe(65_536);
    expect(lookupModelLimits('o3-mini-2025-01-31')?.maxOutputTokens).toBe(100_000);
    expect(lookupModelLimits('gpt-4.1-2025-04-14')).toEqual({ contextWindow: 1_047_576, maxOutputTokens: 32_768 });
    expect(lookupModelLimits('gpt-5-chat-latest')?.maxOutputTokens).toBe(16_384);
    expect(lookupModelLimits('meta-llama/Llama-3.3-70B-Instruct')).toEqual({ contextWindow: 131_072 });
    expect(lookupModelLimits('meta-llama/Meta-Llama-3.1-8B-Instruct')).toEqual({ contextWindow: 131_072 });
    expect(lookupModelLimits('deepseek-chat')).toEqual({ contextWindow: 128_000, maxOutputTokens: 8192 });
  });

  it('takes the longest known family prefix for an unknown variant, never a partial word', () => {
    expect(lookupModelLimits('gpt-4o-audio-preview')).toEqual({
      ...BUILT_IN_MODEL_LIMITS['gpt-4o'],
      inferredFrom: 'gpt-4o',
    });
    expect(lookupModelLimits('gpt-4o-mini-search-preview')).toEqual({
      ...BUILT_IN_MODEL_LIMITS['gpt-4o-mini'],
      inferredFrom: 'gpt-4o-mini',
    });
    expect(lookupModelLimits('gpt-4.5-preview')).toBeUndefined();
    expect(lookupModelLimits('o10')).toBeUndefined();
    expect(lookupModelLimits('my-finetune')).toBeUndefined();
    expect(lookupModelLimits('')).toBeUndefined();
    expect(lookupModelLimits(undefined)).toBeUndefined();
  });

  it('knows the current Claude models exactly (Claude Code 2.1 sends claude-opus-4-8)', () => {
    for (const id of ['claude-opus-4-8', 'claude-opus-5', 'claude-opus-5-5', 'claude-sonnet-5', 'claude-fable-5-1'])
      expect(lookupModelLimits(id), id).toEqual({ contextWindow: 1_000_000, maxOutputTokens: 128_000 });
    expect(lookupModelLimits('claude-opus-4-8-20260528')?.inferredFrom).toBeUndefined();
  });

  it('marks a guess from a similar name, and an exact override replaces the guess', () => {
    expect(lookupModelLimits('claude-opus-4-9')).toEqual({
      ...BUILT_IN_MODEL_LIMITS['claude-opus-4'],
      inferredFrom: 'claude-opus-4',
    });
    const limits = createModelLimits({ 'claude-opus-4-9': { contextWindow: 500_000 } });
    expect(limits('claude-opus-4-9')).toEqual({ contextWindow: 500_000 });
  });

  it('keeps Ollama tags and unknown colon prefixes', () => {
    expect(canonicalModelId('llama3.3:70b')).toBe('llama3.3:70b');
    expect(canonicalModelId('openai:gpt-4o')).toBe('gpt-4o');
    expect(canonicalModelId('anthropic/claude-3.7-sonnet:thinking')).toBe('claude-3-7-sonnet');
  });

  it('overrides win field by field and may add new models', () => {
    const limits = createModelLimits({
      'gpt-4o': { maxOutputTokens: 4096 },
      'my-finetune': { contextWindow: 32_768, maxOutputTokens: 2048 },
    });
    expect(limits('openai/gpt-4o')).toEqual({ contextWindow: 128_000, maxOutputTokens: 4096 });
    expect(limits('my-finetune')).toEqual({ contextWindow: 32_768, maxOutputTokens: 2048 });
    expect(createModelLimits({}, { builtIns: false })('gpt-4o')).toBeUndefined();
  });

  it('rejects bad tables with a ConfigError naming the option or variable', () => {
    expect(() => createModelLimits({ x: { maxOutputTokens: 0 } })).toThrow(ConfigError);
    expect(() => createModelLimits({ x: { maxTokens: 10 } as never })).toThrow(/unknown field "maxTokens"/);
    expect(() => capOutputBudget({ modelLimits: { x: { contextWindow: -1 } } })).toThrow(
      /capOutputBudget: modelLimits/,
    );
    expect(() => loadConfig({ env: { TOKEN_TERMINATOR_MODEL_LIMITS: '{"x":{"contextWindow":"big"}}' } })).toThrow(
      /TOKEN_TERMINATOR_MODEL_LIMITS/,
    );
    expect(() => loadConfig({ env: { TOKEN_TERMINATOR_MODEL_LIMITS: 'not json' } })).toThrow(
      /TOKEN_TERMINATOR_MODEL_LIMITS/,
    );
    const config = loadConfig({
      env: { TOKEN_TERMINATOR_MODEL_LIMITS: '{"my-model":{"contextWindow":32768,"maxOutputTokens":1024}}' },
    });
    expect(config.modelLimits).toEqual({ 'my-model': { contextWindow: 32_768, maxOutputTokens: 1024 } });
    expect(loadConfig({ env: {} }).modelLimits).toEqual({});
  });
});

describe('docs/model-limits.md', () => {
  it('lists every built-in entry with its numbers, and nothing else', () => {
    const doc = readFileSync(new URL('../../docs/model-limits.md', import.meta.url), 'utf8');
    const rows = [...doc.matchAll(/^\| `([^`]+)` \| ([\d,]+) \| ([\d,]+|— \(window only\)) \|$/gm)];
    const listed = Object.fromEntries(
      rows.map((m) => [
        m[1],
        {
          contextWindow: Number(m[2]!.replace(/,/g, '')),
          ...(m[3]!.startsWith('—') ? {} : { maxOutputTokens: Number(m[3]!.replace(/,/g, '')) }),
        },
      ]),
    );
    expect(listed).toEqual(BUILT_IN_MODEL_LIMITS);
  });
});

describe('capOutputBudget with model limits (unit)', () => {
  it('never sends more than the model accepts: the issue #13 case, gpt-4o in a 128k window', async () => {
    const out = await run(
      { counter: exactCounter(600) },
      { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] },
      { model: 'gpt-4o', contextWindow: 128_000 },
    );
    expect(out.value['max_completion_tokens']).toBe(16_384);
  });

  it('fills the window from the table when the route names only the model', async () => {
    const out = await run(
      { counter: exactCounter(195_000) },
      { model: 'claude-sonnet-4-5', max_tokens: 64_000, system: 's', messages: [{ role: 'user', content: 'u' }] },
      { provider: 'anthropic' },
    );
    expect(out.value['max_tokens']).toBe(5000);
  });

  it('lowers a caller cap above the model ceiling', async () => {
    const out = await run({ counter: exactCounter(10) }, { model: 'gpt-4.1', input: 'x', max_output_tokens: 200_000 });
    expect(out.value['max_output_tokens']).toBe(32_768);
  });

  it('route.outputCap bounds the cap; route.maxOutputTokens and config override the table', async () => {
    const request = { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] };
    expect(
      (await run({ counter: exactCounter(10) }, request, { outputCap: 8000 })).value['max_completion_tokens'],
    ).toBe(8000);
    expect(
      (await run({ counter: exactCounter(10) }, request, { maxOutputTokens: 12_000 })).value['max_completion_tokens'],
    ).toBe(12_000);
    expect(
      (await run({ counter: exactCounter(10), modelLimits: { 'gpt-4o': { maxOutputTokens: 9000 } } }, request)).value[
        'max_completion_tokens'
      ],
    ).toBe(9000);
    const config = loadConfig({ env: { TOKEN_TERMINATOR_MODEL_LIMITS: '{"gpt-4o":{"contextWindow":20000}}' } });
    expect((await run({ config, counter: exactCounter(10_000) }, request)).value['max_completion_tokens']).toBe(10_000);
  });

  it('leaves the request unchanged when the model ceiling is below the required output (incontext)', async () => {
    const request = deepFreeze({ model: 'gpt-4-turbo', messages: [{ role: 'user', content: 'hi' }] });
    const out = await run({ counter: exactCounter(10), minOutputTokens: 8192 }, request);
    expect(out.value).toBe(request);
    expect(out.decisions.at(-1)?.reason).toBe('output limit below required output');
  });

  it('a guess from a similar name never lowers the caller cap (Claude Code: claude-opus-4-9, max_tokens 64,000)', async () => {
    const request = {
      model: 'claude-opus-4-9',
      max_tokens: 64_000,
      system: 's',
      messages: [{ role: 'user', content: 'u' }],
    };
    const out = await run({ counter: exactCounter(30_000) }, request, { provider: 'anthropic' });
    expect(out.value['max_tokens']).toBe(64_000);
    // Without a cap of its own the guess still gives one (the older model's ceiling, the safe side).
    const { max_tokens: _, ...uncapped } = request;
    const filled = await run({ counter: exactCounter(30_000) }, uncapped, { provider: 'anthropic' });
    expect(filled.value['max_tokens']).toBe(32_000);
  });

  it('the window arithmetic still applies to a guessed model: cap = min(remaining, caller cap)', async () => {
    const request = {
      model: 'claude-opus-4-9',
      max_tokens: 64_000,
      system: 's',
      messages: [{ role: 'user', content: 'u' }],
    };
    const out = await run({ counter: exactCounter(180_000) }, request, {
      provider: 'anthropic',
      contextWindow: 200_000,
    });
    expect(out.value['max_tokens']).toBe(20_000);
  });

  it('an exactly known model keeps its own ceiling: claude-opus-4-8 is not cut to claude-opus-4', async () => {
    const request = {
      model: 'claude-opus-4-8',
      max_tokens: 64_000,
      system: 's',
      messages: [{ role: 'user', content: 'u' }],
    };
    const out = await run({ counter: exactCounter(30_000) }, request, { provider: 'anthropic' });
    expect(out.value['max_tokens']).toBe(64_000);
  });

  it('an id spelled without separators is guessed like a misspelled suffix: gpt4o is capped as gpt-4o-typo is, and both say so', async () => {
    expect(lookupModelLimits('gpt4o')).toMatchObject({ maxOutputTokens: 16_384, inferredFrom: 'gpt-4o' });
    expect(lookupModelLimits('gpt-4o-typo')).toMatchObject({ maxOutputTokens: 16_384, inferredFrom: 'gpt-4o' });
    for (const model of ['gpt4o', 'gpt-4o-typo']) {
      const out = await run({ counter: exactCounter(1000) }, { model, messages: [{ role: 'user', content: 'u' }] });
      expect(out.value['max_completion_tokens'] ?? out.value['max_tokens'], model).toBe(16_384);
      const hint = out.decisions.find((d) => d.kind === 'measured')?.reason;
      expect(hint, model).toContain(`model "${model}" is not in the built-in limits table`);
      expect(hint, model).toContain('"gpt-4o"');
      expect(hint, model).toContain('TOKEN_TERMINATOR_MODEL_LIMITS');
    }
  });

  it('an unknown id gets a hint naming the nearest known id when one is close, and a known id none', async () => {
    expect(modelLimitsHint('gpt-4o')).toBeUndefined();
    expect(modelLimitsHint('gtp-4o')).toMatch(/no output cap is set \(did you mean "gpt-4o"\?\)/);
    expect(modelLimitsHint('my-finetune')).not.toContain('did you mean');
    const out = await run({ counter: exactCounter(10) }, { model: 'gtp-4o', messages: [] });
    expect(out.decisions.map((d) => d.kind)).toEqual(['measured', 'skipped']);
    expect(out.decisions[0]?.reason).toContain('did you mean "gpt-4o"?');
    // A route that gives its own window needs no table entry, and gets no hint.
    const routed = await run(
      { counter: exactCounter(10) },
      { model: 'gtp-4o', messages: [] },
      { contextWindow: 32_000 },
    );
    expect(routed.decisions.some((d) => d.kind === 'measured')).toBe(false);
  });

  it('a model the table does not know and a route without a window is left alone', async () => {
    const out = await run({ counter: exactCounter(10) }, { model: 'my-finetune', input: 'x' });
    expect(out.decisions.at(-1)?.reason).toBe('no budgeting window');
  });
});

describe('capOutputBudget with model limits (properties)', () => {
  it('the cap is never above the model ceiling or route.outputCap, and is inserted only when both leave the required output', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          window: fc.integer({ min: 10_000, max: 400_000 }),
          prompt: fc.integer({ min: 0, max: 420_000 }),
          reserve: fc.integer({ min: 1, max: 8000 }),
          ceiling: fc.option(fc.integer({ min: 1, max: 200_000 }), { nil: undefined }),
          routeCap: fc.option(fc.integer({ min: 1, max: 200_000 }), { nil: undefined }),
          callerCap: fc.option(fc.integer({ min: 1, max: 500_000 }), { nil: undefined }),
        }),
        async (s) => {
          const request = deepFreeze({
            model: 'm-under-test',
            messages: [{ role: 'user', content: 'u' }],
            ...(s.callerCap === undefined ? {} : { max_completion_tokens: s.callerCap }),
          });
          const route: Route = {
            contextWindow: s.window,
            ...(s.routeCap === undefined ? {} : { outputCap: s.routeCap }),
          };
          const modelLimits = s.ceiling === undefined ? {} : { 'm-under-test': { maxOutputTokens: s.ceiling } };
          const out = await run(
            { counter: exactCounter(s.prompt), minOutputTokens: s.reserve, fallbackMarginTokens: 0, modelLimits },
            request,
            route,
          );
          const r = s.routeCap !== undefined && s.routeCap < s.reserve ? s.routeCap : s.reserve;
          const required = s.callerCap === undefined ? r : Math.min(r, s.callerCap);
          const remaining = s.window - s.prompt;
          const limits = [s.ceiling, s.routeCap].filter((x): x is number => x !== undefined);
          const limit = limits.length === 0 ? undefined : Math.min(...limits);
          const cap = out.value['max_completion_tokens'];
          if (remaining < required || (limit !== undefined && limit < required)) {
            expect(out.value).toBe(request);
            return;
          }
          const expected = Math.min(
            remaining,
            ...(s.callerCap === undefined ? [] : [s.callerCap]),
            ...(limit === undefined ? [] : [limit]),
          );
          expect(cap).toBe(expected);
          if (s.ceiling !== undefined) expect(cap).toBeLessThanOrEqual(s.ceiling);
          if (s.routeCap !== undefined) expect(cap).toBeLessThanOrEqual(s.routeCap);
          expect(cap).toBeGreaterThanOrEqual(required);
        },
      ),
      { numRuns: 300 },
    );
  });
});
