import { describe, expect } from 'vitest';
import { fc, it, test } from '@fast-check/vitest';
import { TestScheduler } from 'rxjs/testing';
import { routeSkills } from '../../operators/route-skills.js';
import { createStep, type ProviderRequest, type Step } from '../../src/step.js';
import { serializedChars } from '../../src/measure/index.js';
import type { TokenCounter } from '../../src/measure/types.js';
import { findCatalogs } from '../../src/compile/skill-catalog.js';
import {
  checkSmaller,
  deepFreeze,
  firstDifference,
  requestStream,
  testInvariants,
  withDeps,
} from '../../src/testing/index.js';
import { runAll } from '../compile/helpers.js';
import { DISCOVERY_TOOLS, SKILL_PROMPT, skillCatalogText } from './skill-fixture.js';
import { propertyDeps, REQUEST_INVARIANTS } from '../support/properties.js';

const ctx = { sessionId: 's' };
const chat = (
  prompt = SKILL_PROMPT,
  system = skillCatalogText(),
  tools: unknown[] = DISCOVERY_TOOLS,
): ProviderRequest =>
  deepFreeze({
    model: 'gpt-4o',
    tools,
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: prompt },
    ],
  });
const systemOf = (r: ProviderRequest): string => (r['messages'] as { content: string }[])[0]!.content;

describe('routeSkills — unit', () => {
  it('keeps the relevant entries, points at discovery for the rest, and leaves the caller untouched', async () => {
    const req = chat();
    const before = structuredClone(req);
    const [out] = await runAll(routeSkills(), [[req, ctx]]);
    expect(req).toEqual(before);
    const entries = findCatalogs(systemOf(out!.value))[0]!.entries.map((e) => e.name);
    expect(entries).toContain('github-release');
    expect(entries).not.toContain('calendar');
    expect(systemOf(out!.value)).toContain('skills_list(query=...)');
    expect(systemOf(out!.value).startsWith('You can load skills on demand.\n<available_skills>')).toBe(true);
    expect(systemOf(out!.value).endsWith('</available_skills>\nAlways answer briefly.')).toBe(true);
    expect(serializedChars(out!.value)).toBeLessThan(serializedChars(req));
    expect(out!.decisions.at(-1)).toMatchObject({ stage: 'routeSkills', kind: 'applied' });
  });

  it('routes Responses instructions (string input) and Anthropic system blocks', async () => {
    const responses = deepFreeze({
      instructions: skillCatalogText(),
      input: SKILL_PROMPT,
      tools: [
        { type: 'function', name: 'skills_list' },
        { type: 'function', name: 'skill_view' },
      ],
    });
    const anthropic = deepFreeze({
      system: [{ type: 'text', text: skillCatalogText() }],
      max_tokens: 10,
      tools: [
        { name: 'skills_list', input_schema: {} },
        { name: 'skill_view', input_schema: {} },
      ],
      messages: [{ role: 'user', content: SKILL_PROMPT }],
    });
    const [a, b] = await runAll(routeSkills(), [
      [responses, ctx],
      [anthropic, ctx],
    ]);
    expect(String(a!.value['instructions'])).not.toContain('calendar');
    expect(JSON.stringify(b!.value['system'])).not.toContain('calendar');
  });

  it('leaves the request alone without both discovery tools, with a small catalog, or a blank prompt', async () => {
    const oneTool = chat(SKILL_PROMPT, skillCatalogText(), [DISCOVERY_TOOLS[0]]);
    const small = chat();
    const blank = chat('   ');
    const [a, b, c] = await runAll(routeSkills({ minCatalogSkills: 9 }), [
      [oneTool, ctx],
      [small, ctx],
      [blank, ctx],
    ]);
    expect(a!.value).toBe(oneTool);
    expect(b!.value).toBe(small);
    expect(c!.value).toBe(blank);
  });

  it('never rewrites a catalog quoted in user text', async () => {
    const req = deepFreeze({
      tools: DISCOVERY_TOOLS,
      messages: [
        { role: 'system', content: 'plain' },
        { role: 'user', content: `${skillCatalogText()}\n${SKILL_PROMPT}` },
      ],
    });
    const [out] = await runAll(routeSkills(), [[req, ctx]]);
    expect(out!.value).toBe(req);
  });

  it('uses a pluggable scorer and falls back to lexical when it throws', async () => {
    const [onlyEmail] = await runAll(routeSkills({ scorer: (_p, e) => (e.name === 'email' ? 10 : 0) }), [
      [chat(), ctx],
    ]);
    expect(findCatalogs(systemOf(onlyEmail!.value))[0]!.entries.map((e) => e.name)).toEqual(['email']);
    const [fallback] = await runAll(
      routeSkills({
        scorer: () => {
          throw new Error('x');
        },
      }),
      [[chat(), ctx]],
    );
    expect(findCatalogs(systemOf(fallback!.value))[0]!.entries.map((e) => e.name)).toContain('github-release');
  });

  it('rejects a char-only win when the exact token count does not shrink', async () => {
    const liar: TokenCounter = {
      name: 'liar',
      exact: true,
      count: (t) => (t.includes('<available_skills>\n[') ? 1_000_000 : 1),
    };
    const req = chat();
    const [out] = await runAll(routeSkills({ counter: liar }), [[req, ctx]]);
    expect(out!.value).toBe(req);
    expect(out!.decisions.at(-1)).toMatchObject({ kind: 'skipped', reason: 'not smaller in tokens' });
  });

  it('near a tie compares the JSON-escaped instruction texts, as the tool-result stages do', async () => {
    // A tokenizer for which the routed text is a little shorter as plain text but far longer as the
    // JSON string the request carries (its escaped newlines do not merge): the wire grew, so the
    // rendering must be refused. The old gate counted plain texts only and accepted it.
    const routed = '<available_skills>\n[';
    const escaped = JSON.stringify(routed).slice(1, -1);
    const counter: TokenCounter = {
      name: 'escapes-cost',
      exact: true,
      count: (t) => (t.includes(escaped) ? 1_000_000 : t.includes(routed) ? 95 : 100),
    };
    const req = chat();
    const [out] = await runAll(routeSkills({ counter }), [[req, ctx]]);
    expect(out!.value).toBe(req);
    expect(out!.decisions.at(-1)).toMatchObject({ kind: 'skipped', reason: 'not smaller in tokens' });
    // Far from a tie the plain counts decide (the escaped forms are not asked for).
    const far: TokenCounter = {
      ...counter,
      count: (t) => (t.includes(escaped) ? 1_000_000 : t.includes(routed) ? 89 : 100),
    };
    const [applied] = await runAll(routeSkills({ counter: far }), [[req, ctx]]);
    expect(applied!.decisions.at(-1)).toMatchObject({ kind: 'applied', savedTokens: 11 });
  });

  it('is sticky per session: a later prompt reuses the first routing byte for byte', async () => {
    const [first, second] = await runAll(routeSkills(), [
      [chat(), ctx],
      [chat('Send an email to the team about the calendar'), ctx],
    ]);
    expect(systemOf(second!.value)).toBe(systemOf(first!.value));
  });

  it('validates options when built', () => {
    expect(() => routeSkills({ minCatalogSkills: 0 })).toThrow(/routeSkills/);
    expect(() => routeSkills({ delimiters: { open: '', close: 'x' } })).toThrow(/routeSkills/);
  });

  it('preserves order and passes every Step through (marbles)', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ cold, expectObservable }) => {
      const small: Step<ProviderRequest> = createStep({ messages: [{ role: 'user', content: 'hi' }] }, ctx);
      const other: Step<ProviderRequest> = createStep({ prompt: 'x' }, ctx);
      expectObservable(cold('a-b|', { a: small, b: other }).pipe(routeSkills())).toBe('a-b|', { a: small, b: other });
    });
  });
});

const properties = await propertyDeps();

describe('routeSkills — properties', () => {
  const { vault: propertyVault, counter } = properties;

  describe('kit invariants (generated catalogs, prompts and discovery tools in three formats)', () => {
    const op = withDeps<ProviderRequest>(({ counter: c }) => routeSkills(c === undefined ? {} : { counter: c }));
    const inputs = requestStream({ maxLength: 2, skills: 'always', sizes: ['tiny'] });
    testInvariants(test, op, {
      vault: propertyVault,
      counter,
      inputs,
      only: REQUEST_INVARIANTS,
      params: { numRuns: 20 },
    });

    it('routes some of the generated catalogs (the properties are not vacuous)', async () => {
      let applied = 0;
      for (const [k, requests] of fc.sample(inputs, { numRuns: 20, seed: 42 }).entries()) {
        const outs = await runAll(
          routeSkills({ counter }),
          requests.map((r) => [r, { sessionId: `coverage-${k}` }] as const),
        );
        applied += outs.filter((o) => o.decisions.some((d) => d.kind === 'applied')).length;
      }
      expect(applied).toBeGreaterThan(0);
    });
  });

  test.prop([fc.string({ maxLength: 60 })], { numRuns: 40 })(
    'any prompt leaves the output unchanged or strictly smaller in chars and tokens, caller never mutated',
    async (prompt) => {
      const req = chat(`${prompt} release`);
      const before = structuredClone(req);
      const [out] = await runAll(routeSkills({ counter }), [[req, { sessionId: `p-${prompt}` }]]);
      expect(firstDifference(before, req)).toBeUndefined();
      checkSmaller(req, out!.value, 'request', counter);
      if (out!.value !== req) expect(counter.count(systemOf(out!.value))).toBeLessThan(counter.count(systemOf(req)));
    },
  );
});
