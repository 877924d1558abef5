/**
 * Early unsubscription, one marble per operator (the shape of RxJS's own operator specs): the
 * subscriber leaves at the `!` of the unsubscription marble while a reduction is still in flight.
 * Each case checks, in virtual time, what was emitted before leaving and when the source was
 * unsubscribed; then, in real time, that the cancelled run left nothing behind that changes a
 * later run of the same operator (per-subscription state, no half-written memo).
 *
 * Every operator here reduces asynchronously (vault, counting), and virtual time flushes before any
 * promise settles, so each reduction is provably in flight at the unsubscription frame whatever the
 * machine's speed. (rewriteTerminalCommand's child-process case is in rewrite-terminal-command.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { from, lastValueFrom, map, toArray, type OperatorFunction } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import {
  capOutputBudget,
  collapseDuplicates,
  compileRequest,
  compressToolResult,
  deltaRepeatedOutput,
  routeSkills,
} from '../../operators/index.js';
import { case4Request } from '../../src/cli/bench/request-cases.js';
import { createTiktokenCounter } from '../../src/measure/index.js';
import { createStep, type ProviderRequest, type Step, type StepContext, type ToolResult } from '../../src/step.js';
import { createVault } from '../../src/vault/index.js';
import type { Vault } from '../../src/vault/types.js';
import { skillCatalogText, SKILL_PROMPT, DISCOVERY_TOOLS } from './skill-fixture.js';

const LOG = Array.from(
  { length: 400 },
  (_, i) =>
    `2026-12-01T10:00:${String(i % 60).padStart(2, '0')} INFO worker ${i % 7} processed batch ${i} in ${(i * 37) % 900} ms`,
).join('\n');
// A system prompt above the providers' minimum cacheable prefix, and a loop of large outputs.
const SYSTEM = `You are a coding agent. ${'Follow the repository conventions and explain each step. '.repeat(90)}`;
function agentLoop(rounds: number): ProviderRequest[] {
  const messages: unknown[] = [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: 'Fix the bug.' },
  ];
  const requests: ProviderRequest[] = [];
  for (let t = 0; t < rounds; t++) {
    messages.push({
      role: 'assistant',
      content: `step ${t}`,
      tool_calls: [{ id: `c${t}`, type: 'function', function: { name: 'bash', arguments: `{"command":"step ${t}"}` } }],
    });
    messages.push({ role: 'tool', tool_call_id: `c${t}`, content: `${LOG}\nstep ${t}` });
    requests.push({ model: 'gpt-4o', messages: [...messages] });
  }
  return requests;
}
const toolStep = (content: string, i: number, ctx: StepContext, command = `make run-${i}`): Step<ToolResult> =>
  createStep({ callId: `c${i}`, name: 'terminal', args: { command }, content }, ctx);
// A 300-line listing whose lines do not factor, so only a delta makes the repeat smaller.
const listing = (change?: string): string =>
  Array.from({ length: 300 }, (_, i) =>
    change !== undefined && i === 150
      ? change
      : `-rw-r--r-- 1 dev staff ${(i * 7919) % 100000} Mar ${1 + (i % 28)} file_${i.toString(36)}_${'abcxyz'[i % 6]}.txt`,
  ).join('\n');

/** What each operator emitted as values (ids), for comparing a cancelled run's successor with a clean run. */
const contents = (steps: readonly Step<unknown>[]): string[] => steps.map((s) => JSON.stringify(s.value));

interface Case<T> {
  readonly name: string;
  readonly op: (vault: Vault) => OperatorFunction<Step<T>, Step<T>>;
  readonly steps: (ctx: StepContext) => readonly Step<T>[];
}

const toolCases: Case<ToolResult>[] = [
  {
    name: 'compressToolResult',
    op: (vault) => compressToolResult({ vault }),
    steps: (ctx) => [0, 1, 2].map((i) => toolStep(`${LOG}\nrun ${i}`, i, ctx)),
  },
  {
    name: 'deltaRepeatedOutput',
    op: (vault) => deltaRepeatedOutput({ vault }),
    steps: (ctx) =>
      [undefined, undefined, 'CHANGED: file_new.txt'].map((change, i) =>
        toolStep(listing(change), i, ctx, 'ls -l /srv/data'),
      ),
  },
];

const requestCases: Case<ProviderRequest>[] = [
  {
    name: 'collapseDuplicates',
    op: (vault) => collapseDuplicates({ vault, minArtifactChars: 1000 }),
    steps: (ctx) => [0, 1, 2].map((i) => createStep(case4Request(`${LOG}\n${i}`), { ...ctx, requestId: `r${i}` })),
  },
  {
    name: 'routeSkills',
    op: () => routeSkills(),
    steps: (ctx) =>
      [0, 1, 2].map((i) =>
        createStep<ProviderRequest>(
          {
            model: 'm',
            messages: [
              { role: 'system', content: skillCatalogText() },
              { role: 'user', content: `${SKILL_PROMPT} (${i})` },
            ],
            tools: DISCOVERY_TOOLS,
          },
          { ...ctx, requestId: `q${i}` },
        ),
      ),
  },
  {
    name: 'capOutputBudget',
    op: () => capOutputBudget({ counter: createTiktokenCounter('o200k_base') }),
    steps: (ctx) =>
      [0, 1, 2].map((i) =>
        createStep<ProviderRequest>(
          { model: 'test-model', messages: [{ role: 'user', content: `question ${i}: ${LOG.slice(0, 2000)}` }] },
          { ...ctx, route: { model: 'test-model', contextWindow: 32_000 } },
        ),
      ),
  },
  {
    name: 'compileRequest',
    op: (vault) => compileRequest({ vault, minVaultChars: 500 }),
    steps: (ctx) => agentLoop(6).map((r, i) => createStep(r, { ...ctx, requestId: `r${i}` })),
  },
];

describe('early unsubscription marbles (the reduction is in flight at the "!")', () => {
  for (const c of [...toolCases, ...requestCases] as Case<unknown>[]) {
    it(`${c.name}: emits nothing before its reduction settles, leaves the source at the unsubscription frame, and the cancelled run leaves no trace`, async () => {
      await using vault = await createVault({ path: ':memory:' });
      await using fresh = await createVault({ path: ':memory:' });
      const op = c.op(vault);
      const ctx = { sessionId: `marble-${c.name}` };
      const steps = c.steps(ctx);
      const scheduler = new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
      scheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
        const source = cold('a-b-c|', { a: steps[0]!, b: steps[1]!, c: steps[2]! });
        expectObservable(
          source.pipe(
            op,
            map((s) => s.value),
          ),
          '^--!',
        ).toBe('');
        expectSubscriptions(source.subscriptions).toBe('^--!');
      });
      // Let the abandoned reduction settle, then run the same session again through the same
      // operator: it must give exactly what a run that was never cancelled gives (on a fresh vault).
      await new Promise((r) => setTimeout(r, 0));
      const again = await lastValueFrom(from(c.steps(ctx)).pipe(op, toArray()));
      const clean = await lastValueFrom(from(c.steps(ctx)).pipe(c.op(fresh), toArray()));
      expect(again).toHaveLength(steps.length);
      expect(contents(again)).toEqual(contents(clean));
      expect(contents(again)).not.toEqual(contents(steps)); // the operator really reduces these inputs
    });
  }
});
