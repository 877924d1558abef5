import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { from, lastValueFrom, Subject, toArray } from 'rxjs';
import { capOutputBudget, createPressure, type CapOutputBudgetOptions } from '../../operators/cap-output-budget.js';
import {
  BudgetCounterError,
  CAP_FIELDS,
  createCounterRegistry,
  type BudgetCounter,
  type BudgetMeasurement,
} from '../../src/budget/index.js';
import { ConfigError } from '../../src/errors.js';
import { createStep, type ProviderRequest, type Route, type Step } from '../../src/step.js';
import { deepFreeze, firstDifference } from '../../src/testing/index.js';
import { closedPortUrl, runCap as run, TokenizeServer } from '../budget/helpers.js';

type Format = 'chat' | 'responses' | 'anthropic';

const bases: Record<Format, ProviderRequest> = {
  chat: {
    model: 'm',
    messages: [
      { role: 'system', content: 's' },
      { role: 'user', content: 'u' },
    ],
  },
  responses: { model: 'm', input: 'hi' },
  anthropic: { model: 'm', system: 's', messages: [{ role: 'user', content: 'u' }] },
};

const exactCounter = (p: number): BudgetCounter => ({
  name: 'fake',
  exact: true,
  countRequest: () => Promise.resolve(p),
});
const failingCounter: BudgetCounter = {
  name: 'fake',
  exact: true,
  countRequest: () => Promise.reject(new BudgetCounterError('timeout', 'x')),
};

function capFieldsIn(request: ProviderRequest): Array<[string, unknown]> {
  const extra = request['extra_body'] as Record<string, unknown> | undefined;
  const found: Array<[string, unknown]> = [];
  for (const f of CAP_FIELDS) {
    if (f in request) found.push([f, request[f]]);
    if (extra !== undefined && f in extra) found.push([`extra_body.${f}`, extra[f]]);
  }
  return found;
}

describe('capOutputBudget (properties)', () => {
  const scenario = fc
    .record({
      window: fc.integer({ min: 16, max: 400_000 }),
      reserveFraction: fc.double({ min: 0.001, max: 0.6, noNaN: true }),
      marginFraction: fc.double({ min: 0, max: 0.39, noNaN: true }),
      promptFraction: fc.double({ min: 0, max: 1.6, noNaN: true }),
      exact: fc.boolean(),
      format: fc.constantFrom<Format>('chat', 'responses', 'anthropic'),
      caps: fc.array(fc.tuple(fc.constantFrom(...CAP_FIELDS), fc.boolean(), fc.integer({ min: -3, max: 500_000 })), {
        maxLength: 4,
      }),
    })
    .map((s) => {
      const reserve = Math.max(1, Math.floor(s.window * s.reserveFraction));
      const margin = Math.floor(s.window * s.marginFraction);
      return { ...s, reserve, margin, prompt: Math.floor(s.window * s.promptFraction) };
    })
    .filter((s) => s.margin + s.reserve < s.window);

  it('inserts a cap that obeys every rule, or leaves the request unchanged, never mutating it', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        const request: Record<string, unknown> = { ...bases[s.format] };
        const extra: Record<string, unknown> = {};
        for (const [field, inExtra, value] of s.caps) (inExtra ? extra : request)[field] = value;
        if (Object.keys(extra).length > 0) request['extra_body'] = extra;
        deepFreeze(request);
        const snapshot = structuredClone(request);
        // Later tuples overwrite earlier ones for the same field: read B back from the request itself.
        const values = [...CAP_FIELDS.map((f) => request[f]), ...CAP_FIELDS.map((f) => extra[f])];
        const positives = values.filter((v): v is number => typeof v === 'number' && v > 0);
        const b = positives.length > 0 ? Math.min(...positives) : undefined;
        const used = (f: string): boolean => [request[f], extra[f]].some((v) => typeof v === 'number' && v > 0);
        const p = s.exact ? s.prompt : s.prompt + s.margin; // the fallback adds F
        const options: CapOutputBudgetOptions = {
          route: { model: 'm', contextWindow: s.window },
          minOutputTokens: s.reserve,
          fallbackMarginTokens: s.margin,
          counter: s.exact ? exactCounter(s.prompt) : failingCounter,
          fallback: () => s.prompt,
        };
        const out = await run(options, request);
        expect(firstDifference(snapshot, request)).toBeUndefined();
        const required = b === undefined ? s.reserve : Math.min(s.reserve, b);
        const remaining = s.window - p;
        if (remaining < required) {
          expect(out.value).toBe(request);
          expect(out.decisions.at(-1)?.reason).toBe('remaining below required output');
        } else {
          const fields = capFieldsIn(out.value);
          expect(fields).toHaveLength(1);
          const [name, cap] = fields[0] ?? ['', 0];
          const usedMaxOnly = used('max_tokens') && !used('max_completion_tokens');
          const expectedField =
            s.format === 'responses'
              ? 'max_output_tokens'
              : s.format === 'anthropic' || usedMaxOnly
                ? 'max_tokens'
                : 'max_completion_tokens';
          expect(name).toBe(expectedField);
          expect(typeof cap).toBe('number');
          const c = cap as number;
          expect(c).toBeLessThanOrEqual(remaining);
          expect(c).toBeGreaterThanOrEqual(required);
          if (b === undefined || b >= s.reserve) expect(c).toBeGreaterThanOrEqual(s.reserve);
          expect(c).toBe(b === undefined ? remaining : Math.min(remaining, b));
        }
        const pressure = createPressure(options);
        expect((await pressure(request)) >= s.window).toBe(s.window - p < s.reserve);
        await pressure.close();
      }),
      { numRuns: 300 },
    );
  });
});

describe('capOutputBudget (unit)', () => {
  const route: Route = {
    model: 'openai/gpt-5',
    provider: 'openai',
    endpoint: 'https://api.example/v1',
    contextWindow: 100_000,
  };
  const base: CapOutputBudgetOptions = { route, counter: exactCounter(60_000) };

  it('caps a chat request at W − P and records the decision', async () => {
    const out = await run(base, { model: 'gpt-5', messages: [{ role: 'user', content: 'hi' }] }, route);
    expect(out.value['max_completion_tokens']).toBe(40_000);
    expect(out.decisions).toEqual([{ stage: 'capOutputBudget', kind: 'applied', reason: 'capped' }]);
    expect(out.original).not.toHaveProperty('max_completion_tokens');
  });

  it('prefers the compression threshold, and the explicit window override over both', async () => {
    const withThreshold = { ...route, compressionThreshold: 75_000 };
    expect(await run({ ...base, route: withThreshold }, { model: 'gpt-5', input: 'x' })).toMatchObject({
      value: { max_output_tokens: 15_000 },
    });
    expect(
      await run({ ...base, route: withThreshold, compressionWindowTokens: 90_000 }, { model: 'gpt-5', input: 'x' }),
    ).toMatchObject({ value: { max_output_tokens: 30_000 } });
  });

  it('uses a smaller explicit route cap as R', async () => {
    const tight = { ...base, counter: exactCounter(99_000) };
    expect((await run(tight, { model: 'gpt-5', input: 'x' })).value).not.toHaveProperty('max_output_tokens');
    expect(
      (await run({ ...tight, route: { ...route, outputCap: 1000 } }, { model: 'gpt-5', input: 'x' })).value[
        'max_output_tokens'
      ],
    ).toBe(1000);
  });

  it('passes requests for another model, provider or endpoint unchanged', async () => {
    const request = deepFreeze({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'title?' }],
      max_tokens: 30,
    });
    const other = await run(base, request, { ...route, model: 'gpt-4o-mini' });
    expect(other.value).toBe(request);
    expect(other.decisions.at(-1)?.reason).toBe('other route');
    const sameModel = { model: 'gpt-5', messages: [] };
    expect((await run(base, sameModel, { ...route, provider: 'openrouter' })).value).toBe(sameModel);
    expect((await run(base, sameModel, { ...route, endpoint: 'http://localhost:8000/v1' })).value).toBe(sameModel);
    expect((await run(base, sameModel, { ...route, endpoint: 'https://api.example/v1/' })).value).not.toBe(sameModel);
    expect((await run(base, { ...sameModel, model: 'openai:gpt-5' }, route)).value['max_completion_tokens']).toBe(
      40_000,
    );
  });

  it('emits max_tokens for the vLLM dialect and strips aliases from extra_body', async () => {
    const out = await run(
      { ...base, dialect: 'vllm' },
      { model: 'gpt-5', messages: [], max_output_tokens: 50_000, extra_body: { max_tokens: 45_000, top_k: 1 } },
    );
    expect(out.value).toEqual({ model: 'gpt-5', messages: [], max_tokens: 40_000, extra_body: { top_k: 1 } });
    expect((await run({ ...base, dialect: 'vllm' }, { model: 'gpt-5', messages: [] })).value).toEqual({
      model: 'gpt-5',
      messages: [],
      max_tokens: 40_000,
    });
    // vLLM accepts both chat fields: a caller that used only max_completion_tokens keeps it (incontext's rule).
    const kept = await run(
      { ...base, dialect: 'vllm' },
      { model: 'gpt-5', messages: [], extra_body: { max_completion_tokens: 45_000 } },
    );
    expect(kept.value).toEqual({ model: 'gpt-5', messages: [], max_completion_tokens: 40_000, extra_body: {} });
  });

  it('skips without a window, for unknown formats, and when already capped', async () => {
    expect((await run({ counter: exactCounter(1) }, { model: 'x', input: 'y' })).decisions.at(-1)?.reason).toBe(
      'no budgeting window',
    );
    expect((await run(base, { model: 'gpt-5', prompt: 'legacy' })).decisions.at(-1)?.reason).toBe(
      'unknown request format',
    );
    const capped = { model: 'gpt-5', input: 'y', max_output_tokens: 40_000 };
    const out = await run(base, capped);
    expect(out.value).toBe(capped);
    expect(out.decisions.at(-1)?.reason).toBe('already capped');
  });

  it('falls back to the rough estimate + F when exact counting fails, and passes unchanged when both fail', async () => {
    const measured: BudgetMeasurement[] = [];
    const out = await run(
      {
        ...base,
        counter: failingCounter,
        fallback: () => 10_000,
        fallbackMarginTokens: 1024,
        onMeasure: (m) => measured.push(m),
      },
      { model: 'gpt-5', input: 'x' },
    );
    expect(out.value['max_output_tokens']).toBe(100_000 - 10_000 - 1024);
    expect(out.decisions.at(-1)).toEqual({
      stage: 'capOutputBudget',
      kind: 'applied',
      reason: 'capped (fallback count)',
      error: 'BudgetCounterError:E_COUNTER_TIMEOUT',
    });
    expect(measured).toEqual([
      {
        outcome: 'capped',
        window: 100_000,
        reserve: 4096,
        counter: 'fake',
        prompt: 11_024,
        cap: 88_976,
        outputLimit: 128_000,
        fallback: 'BudgetCounterError:E_COUNTER_TIMEOUT',
      },
    ]);
    const request = deepFreeze({ model: 'gpt-5', input: 'x' });
    const both = await run(
      {
        ...base,
        counter: failingCounter,
        fallback: () => {
          throw new Error('nope');
        },
      },
      request,
    );
    expect(both.value).toBe(request);
    expect(both.decisions.at(-1)).toMatchObject({ kind: 'failed_open', reason: 'counting failed' });
  });

  it('adds F to an inexact counter and keeps output order', async () => {
    const inexact: BudgetCounter = {
      name: 'est',
      exact: false,
      countRequest: (r) =>
        new Promise((res) => setTimeout(() => res(Number(r['input'])), 30 - Number(r['input']) / 1000)),
    };
    const steps = [20_000, 1_000, 10_000].map((n) =>
      createStep({ model: 'gpt-5', input: String(n) } as ProviderRequest, { sessionId: 's' }),
    );
    const out = await lastValueFrom(
      from(steps).pipe(capOutputBudget({ ...base, counter: inexact, fallbackMarginTokens: 500 }), toArray()),
    );
    expect(out.map((s) => s.value['max_output_tokens'])).toEqual([79_500, 98_500, 89_500]);
  });

  it('rejects bad configuration when built, naming the variable', () => {
    expect(() => capOutputBudget({ route, backend: 'nope', registry: createCounterRegistry() })).toThrow(
      /INCONTEXT_BACKEND/,
    );
    expect(() => capOutputBudget({ route: { contextWindow: 5000 }, counter: exactCounter(1) })).toThrow(ConfigError);
    expect(() => capOutputBudget({ route, backend: 'vllm' })).toThrow(/INCONTEXT_TOKENIZER_URL/);
    expect(() => capOutputBudget({ compressionWindowTokens: 200_000, route, counter: exactCounter(1) })).toThrow(
      /exceeds the context window/,
    );
  });
});

describe('capOutputBudget with the vllm backend against a real /tokenize server', () => {
  const server = new TokenizeServer();
  let url = '';
  const route: Route = { model: 'qwen3', contextWindow: 32_768 };
  const request = deepFreeze({ model: 'qwen3', messages: [{ role: 'user', content: 'x'.repeat(400) }] });
  const vllm = (extra: Partial<CapOutputBudgetOptions> = {}, timeoutSeconds = 5): CapOutputBudgetOptions => ({
    route,
    backend: 'vllm',
    config: {
      incontext: {
        backend: 'vllm',
        tokenizerUrl: url,
        tokenizerTimeoutSeconds: timeoutSeconds,
        tokenizerUserAgent: '',
        fallbackMarginTokens: 1024,
        minOutputTokens: 4096,
        compressionWindowTokens: undefined,
      },
      tokenizerJson: '',
      tiktokenEncoding: '',
    },
    fallback: () => 2000,
    ...extra,
  });

  beforeAll(async () => {
    url = await server.listen();
  });
  afterAll(async () => {
    await server.close();
  });

  it('200: caps at W − count with max_tokens (vLLM dialect)', async () => {
    server.mode = 'ok';
    server.count = 1000;
    const out = await run(vllm(), request);
    expect(out.value['max_tokens']).toBe(32_768 - 1000);
    expect(out.decisions.at(-1)?.reason).toBe('capped');
  });

  it.each([
    ['status500', 'E_COUNTER_HTTP_STATUS'],
    ['garbage', 'E_COUNTER_BAD_BODY'],
    ['wrongLength', 'E_COUNTER_CONTEXT_MISMATCH'],
    ['hang', 'E_COUNTER_TIMEOUT'],
  ] as const)('%s → rough estimate + F', async (mode, code) => {
    server.mode = mode;
    const out = await run(vllm({}, 0.3), request);
    expect(out.value['max_tokens']).toBe(32_768 - 2000 - 1024);
    expect(out.decisions.at(-1)).toMatchObject({
      reason: 'capped (fallback count)',
      error: `BudgetCounterError:${code}`,
    });
  });

  it('connection refused → rough estimate + F', async () => {
    const options = vllm();
    const refused = {
      ...options,
      config: { ...options.config!, incontext: { ...options.config!.incontext, tokenizerUrl: await closedPortUrl() } },
    };
    const out = await run(refused, request);
    expect(out.value['max_tokens']).toBe(32_768 - 2000 - 1024);
    expect(out.decisions.at(-1)?.error).toBe('BudgetCounterError:E_COUNTER_CONNECTION');
  });

  it('keeps prompts, URL credentials and raw errors out of decisions and metrics', async () => {
    const secretPrompt = { model: 'qwen3', messages: [{ role: 'user', content: 'PROMPT-SECRET-1234' }] };
    const measurements: BudgetMeasurement[] = [];
    const withCreds = url.replace('http://', 'http://user:URL-SECRET@');
    const leaks: string[] = [];
    for (const mode of ['ok', 'status500', 'garbage'] as const) {
      server.mode = mode;
      const options = vllm({ onMeasure: (m) => measurements.push(m) });
      const out = await run(
        {
          ...options,
          config: { ...options.config!, incontext: { ...options.config!.incontext, tokenizerUrl: withCreds } },
        },
        secretPrompt,
      );
      leaks.push(JSON.stringify(out.decisions));
    }
    const text = leaks.join('\n') + JSON.stringify(measurements);
    expect(measurements.map((m) => m.outcome)).toEqual(['capped', 'capped', 'capped']);
    expect(measurements.map((m) => m.fallback)).toEqual([
      undefined,
      'BudgetCounterError:E_COUNTER_HTTP_STATUS',
      'BudgetCounterError:E_COUNTER_BAD_BODY',
    ]);
    expect(text).not.toMatch(/PROMPT-SECRET|URL-SECRET|127\.0\.0\.1|boom/);
  });

  it('unsubscribing aborts the in-flight /tokenize request: the server sees the socket close', async () => {
    server.mode = 'hang';
    const input = new Subject<Step<ProviderRequest>>();
    const seen: Step<ProviderRequest>[] = [];
    const subscription = input.pipe(capOutputBudget(vllm())).subscribe((s) => seen.push(s));
    const arrived = server.nextArrival();
    const before = server.closedWhileHanging;
    input.next(createStep(request, { sessionId: 's' }));
    await arrived;
    subscription.unsubscribe();
    await expect.poll(() => server.closedWhileHanging).toBe(before + 1);
    expect(seen).toEqual([]);
  });
});
