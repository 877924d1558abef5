/**
 * Fuzz (issue 8, item 3): arbitrary JSON values and malformed requests / tool results / tool calls
 * (wrong types, missing ids, huge strings, deep nesting, unknown roles) through the public entry
 * points — the Terminator facades, every operator on its own, and the recovery tool handler.
 * Never a throw or a rejection; the caller's value is never mutated; the output is the identical
 * input or a valid smaller value whose receipts recover exactly.
 */
import fc from 'fast-check';
import type { OperatorFunction } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { capOutputBudget } from '../../operators/cap-output-budget.js';
import { compileRequest } from '../../operators/compile-request.js';
import { compressToolResult } from '../../operators/compress-tool-result.js';
import { collapseDuplicates } from '../../operators/collapse-duplicates.js';
import { rewriteTerminalCommand } from '../../operators/rewrite-terminal-command.js';
import { routeSkills } from '../../operators/route-skills.js';
import { deltaRepeatedOutput } from '../../operators/delta-repeated-output.js';
import { RECOVERY_ACTIONS } from '../../src/recovery/schema.js';
import { serializedChars } from '../../src/measure/index.js';
import { createTiktokenCounter } from '../../src/measure/index.js';
import { createTerminator, type Terminator } from '../../src/runtime/index.js';
import { createStep, type ProviderRequest, type Step, type ToolCall, type ToolResult } from '../../src/step.js';
import { chatRequest, providerRequest } from '../../src/testing/arbitraries/requests.js';
import { roleProblems } from '../../src/testing/format.js';
import { runSteps } from '../../src/testing/harness.js';
import { RTK_STUB, idMatches, recoverViaTool, receiptIds, tempDir, withoutCaps, type ItemResult } from './harness.js';

const { dir, cleanup } = tempDir('tt-rel-fuzz-');
let tt: Terminator;
let run = 0;
const figures = { facadeRuns: 0, facadeCalls: 0, operatorRuns: 0, recoveryCalls: 0, changed: 0, receipts: 0 };

beforeAll(async () => {
  tt = await createTerminator({
    env: {},
    overrides: {
      dbPath: `${dir}/vault.sqlite3`,
      rtkPath: RTK_STUB,
      timeoutMs: 200,
      minArtifactChars: 1000,
      contextMinVaultChars: 400,
      contextCollapseAfterTurns: 2,
      contextInlineRecentTurns: 1,
      temporalMinChars: 200,
    },
  });
});
afterAll(async () => {
  console.log(`fuzz: ${JSON.stringify(figures)}`);
  await tt.close();
  cleanup();
});

// ---------------------------------------------------------------------------------------------
// Arbitraries for malformed values.

const huge = fc
  .integer({ min: 60_000, max: 200_000 })
  .map((n) => `line of output ${n}\n`.repeat(Math.ceil(n / 20)).slice(0, n));
const text = fc.oneof(
  { weight: 6, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 1, arbitrary: huge },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
);
const deep = fc.integer({ min: 50, max: 400 }).map((depth) => {
  let v: unknown = 'bottom';
  for (let i = 0; i < depth; i++) v = i % 2 === 0 ? [v] : { nested: v };
  return v;
});
const weird = fc.oneof(
  fc.jsonValue(),
  text,
  deep,
  fc.constant(null),
  fc.constant(undefined),
  fc.integer(),
  fc.constant(Number.NaN),
);
const role = fc.oneof(
  fc.constantFrom('system', 'user', 'assistant', 'tool', 'developer', 'function'),
  fc.string({ maxLength: 8 }),
  fc.integer(),
  fc.constant(undefined),
);
const badCall = fc.record(
  {
    id: fc.oneof(fc.string({ maxLength: 6 }), fc.integer(), fc.constant(undefined)),
    type: fc.constant('function'),
    function: fc.oneof(
      fc.record({
        name: fc.oneof(fc.constantFrom('terminal', 'read_file'), fc.integer()),
        arguments: fc.oneof(fc.string({ maxLength: 30 }), fc.jsonValue()),
      }),
      weird,
    ),
  },
  { requiredKeys: [] },
);
const message = fc.oneof(
  fc.record(
    {
      role,
      content: weird,
      tool_call_id: fc.oneof(fc.string({ maxLength: 6 }), fc.integer()),
      tool_calls: fc.oneof(fc.array(badCall, { maxLength: 3 }), weird),
      name: weird,
    },
    { requiredKeys: [] },
  ),
  weird,
);
const malformedRequest = fc.oneof(
  fc.record(
    {
      model: fc.oneof(fc.string({ maxLength: 12 }), fc.integer(), fc.constant(undefined)),
      messages: fc.oneof(fc.array(message, { maxLength: 12 }), weird),
      tools: fc.oneof(fc.array(weird, { maxLength: 3 }), weird),
      max_tokens: fc.oneof(fc.integer(), weird),
      input: weird,
      system: weird,
    },
    { requiredKeys: [] },
  ),
  // A valid request with one message replaced by a malformed one.
  fc.tuple(chatRequest({ maxTurns: 3 }), message, fc.nat()).map(([req, bad, at]) => {
    const msgs = Array.isArray(req['messages']) ? [...(req['messages'] as unknown[])] : [];
    if (msgs.length > 0) msgs[at % msgs.length] = bad;
    return { ...req, messages: msgs };
  }),
  providerRequest({ maxTurns: 4 }),
);
const toolName = fc.oneof(
  fc.constantFrom('terminal', 'bash', 'search_files', 'read_file', 'process'),
  fc.string({ maxLength: 10 }),
  fc.integer(),
  fc.constant(undefined),
);
const malformedResult = fc.record(
  {
    callId: fc.oneof(fc.string({ maxLength: 6 }), fc.integer(), fc.constant(undefined)),
    name: toolName,
    args: fc.oneof(fc.record({ command: fc.oneof(fc.constantFrom('npm test', 'git status'), weird) }), weird),
    content: fc.oneof(text, huge, weird),
    exitCode: fc.oneof(fc.integer(), weird),
  },
  { requiredKeys: [] },
);
const malformedCall = fc.record(
  {
    id: fc.oneof(fc.string({ maxLength: 6 }), weird),
    name: toolName,
    args: fc.oneof(
      fc.record(
        { command: fc.oneof(fc.constantFrom('git status', 'git log stub-garbage', 'ls'), weird), cwd: weird },
        { requiredKeys: [] },
      ),
      weird,
    ),
  },
  { requiredKeys: [] },
);

function snapshot(value: unknown): string {
  try {
    return (
      JSON.stringify(value, (_k, v: unknown) =>
        v === undefined ? '__undefined__' : typeof v === 'number' && !Number.isFinite(v) ? String(v) : v,
      ) ?? 'undefined'
    );
  } catch {
    return 'unserializable';
  }
}

function sameJson(a: unknown, b: unknown): boolean {
  return snapshot(a) === snapshot(b);
}

/** Output is the input or a valid, smaller value. */
function outputProblem(kind: ItemResult['kind'], input: unknown, out: Step<unknown>): string | undefined {
  if (out.original !== input) return 'output is not the Step of its input';
  if (out.value === input || sameJson(withoutCapsAny(kind, out.value), withoutCapsAny(kind, input))) return undefined;
  figures.changed++;
  if (kind === 'request') {
    const before = serializedChars(withoutCaps(input as ProviderRequest));
    const after = serializedChars(withoutCaps(out.value as ProviderRequest));
    if (!(after < before)) return `request changed but not smaller (${before} → ${after})`;
    if (roleProblems(out.value as ProviderRequest).length > roleProblems(input as ProviderRequest).length)
      return 'request changed into more role problems';
    return undefined;
  }
  if (kind === 'tool_result') {
    const a = (input as ToolResult).content;
    const b = (out.value as ToolResult).content;
    if (typeof a !== 'string' || typeof b !== 'string' || !(b.length < a.length))
      return 'tool result changed but not into a smaller string';
    return undefined;
  }
  const cmd = (out.value as ToolCall).args?.['command'];
  return typeof cmd === 'string' && cmd.startsWith('rtk ')
    ? undefined
    : 'tool call changed into something other than an rtk rewrite';
}

function withoutCapsAny(kind: ItemResult['kind'], v: unknown): unknown {
  return kind === 'request' && v !== null && typeof v === 'object' && !Array.isArray(v)
    ? withoutCaps(v as ProviderRequest)
    : v;
}

async function facadeCall(kind: ItemResult['kind'], input: unknown, sessionId: string, i: number): Promise<ItemResult> {
  const ctx = { sessionId, requestId: `${sessionId}#${i}`, route: { model: 'gpt-4o', contextWindow: 128_000 } };
  const before = snapshot(input);
  let result: ItemResult;
  try {
    const out =
      kind === 'request'
        ? await tt.reduceRequest(input as ProviderRequest, ctx)
        : kind === 'tool_result'
          ? await tt.reduceToolResult(input as ToolResult, { sessionId })
          : await tt.reduceToolCall(input as ToolCall, { sessionId });
    result = { kind, input: input as ProviderRequest, output: out as Step<unknown> };
  } catch (threw) {
    result = { kind, input: input as ProviderRequest, threw };
  }
  figures.facadeCalls++;
  if (snapshot(input) !== before) throw new Error(`${kind} #${i}: the caller's value was mutated`);
  return result;
}

describe('the Terminator facades', () => {
  it('never throw, never mutate, and return the input or a valid smaller value whose receipts recover', async () => {
    const item = fc.oneof(
      { weight: 3, arbitrary: malformedRequest.map((v) => ['request', v] as const) },
      { weight: 3, arbitrary: malformedResult.map((v) => ['tool_result', v] as const) },
      { weight: 1, arbitrary: malformedCall.map((v) => ['tool_call', v] as const) },
      {
        weight: 1,
        arbitrary: fc.tuple(fc.constantFrom('request', 'tool_result', 'tool_call' as const), fc.jsonValue()),
      },
    );
    await fc.assert(
      fc.asyncProperty(fc.array(item, { minLength: 1, maxLength: 6 }), async (items) => {
        const sessionId = `fuzz-${++run}`;
        figures.facadeRuns++;
        const results: ItemResult[] = [];
        for (const [i, [kind, value]] of items.entries()) {
          const r = await facadeCall(kind as ItemResult['kind'], value, sessionId, i);
          if (r.threw !== undefined) throw new Error(`${kind} #${i} threw ${String(r.threw)}`);
          const problem = outputProblem(r.kind, r.input, r.output!);
          if (problem !== undefined) throw new Error(`${kind} #${i}: ${problem}`);
          results.push(r);
        }
        const ids = results.flatMap((r) => receiptIds(r.output?.value));
        figures.receipts += ids.length;
        for (const id of new Set(ids)) {
          const got = await recoverViaTool(tt.recoveryTool, sessionId, id);
          if (got.content === undefined || !idMatches(id, got.content))
            throw new Error(`receipt ${id} does not recover (${got.error ?? 'hash mismatch'})`);
        }
      }),
      { numRuns: 60, seed: 8_2025, endOnFailure: true },
    );
  });

  it('pressure never throws for malformed requests', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(malformedRequest, fc.jsonValue()), async (req) => {
        const p = await tt.pressure(req as ProviderRequest, {
          sessionId: 'p',
          route: { model: 'gpt-4o', contextWindow: 128_000 },
        });
        expect(Number.isFinite(p)).toBe(true);
      }),
      { numRuns: 40, seed: 8_2026 },
    );
  });
});

describe('each operator on its own', () => {
  const counter = createTiktokenCounter('o200k_base');
  afterAll(() => counter.dispose?.());
  type Any = OperatorFunction<Step<unknown>, Step<unknown>>;
  const ops: [string, 'request' | 'tool_result' | 'tool_call', () => Any][] = [
    [
      'rewriteTerminalCommand',
      'tool_call',
      () => rewriteTerminalCommand({ rtkPath: RTK_STUB, timeoutMs: 200 }) as unknown as Any,
    ],
    [
      'deltaRepeatedOutput',
      'tool_result',
      () => deltaRepeatedOutput({ vault: tt.vault, counter, minChars: 200 }) as unknown as Any,
    ],
    [
      'compressToolResult',
      'tool_result',
      () => compressToolResult({ vault: tt.vault, counter, terminalMinChars: 200 }) as unknown as Any,
    ],
    [
      'collapseDuplicates',
      'request',
      () => collapseDuplicates({ vault: tt.vault, counter, minArtifactChars: 500 }) as unknown as Any,
    ],
    ['routeSkills', 'request', () => routeSkills({ vault: tt.vault, counter }) as unknown as Any],
    [
      'compileRequest',
      'request',
      () =>
        compileRequest({
          vault: tt.vault,
          counter,
          minVaultChars: 200,
          collapseAfterTurns: 1,
          inlineRecentTurns: 1,
          blockTurns: 1,
        }) as unknown as Any,
    ],
    [
      'capOutputBudget',
      'request',
      () => capOutputBudget({ counter, route: { model: 'gpt-4o', contextWindow: 128_000 } }) as unknown as Any,
    ],
  ];
  for (const [name, kind, build] of ops) {
    it(`${name}: completes with one output per input, in order, never mutating, identical or smaller`, async () => {
      const values = kind === 'request' ? malformedRequest : kind === 'tool_result' ? malformedResult : malformedCall;
      await fc.assert(
        fc.asyncProperty(
          fc.array(
            fc.oneof(
              { weight: 4, arbitrary: values as fc.Arbitrary<unknown> },
              { weight: 1, arbitrary: fc.jsonValue() as fc.Arbitrary<unknown> },
            ),
            { minLength: 1, maxLength: 5 },
          ),
          async (inputs) => {
            figures.operatorRuns++;
            const sessionId = `op-${name}-${++run}`;
            const before = inputs.map(snapshot);
            const steps = inputs.map((v, i) =>
              createStep<unknown>(v, {
                sessionId,
                requestId: `${sessionId}#${i}`,
                route: { model: 'gpt-4o', contextWindow: 128_000 },
              }),
            );
            const res = await runSteps(build(), steps, 15_000);
            expect(res.errored).toBe(false);
            expect(res.completed).toBe(true);
            expect(res.outputs.length).toBe(steps.length);
            res.outputs.forEach((out, i) => {
              expect(out.original).toBe(steps[i]!.original);
              expect(outputProblem(kind, inputs[i], out)).toBeUndefined();
              expect(snapshot(inputs[i])).toBe(before[i]);
            });
          },
        ),
        { numRuns: 25, seed: 8_2027 },
      );
    });
  }
});

describe('the recovery tool handler', () => {
  it('answers every argument value with JSON (an error result for anything outside the schema), never a throw', async () => {
    const actions = fc.constantFrom(...RECOVERY_ACTIONS, 'delete', 'ARTIFACT_GET', '');
    const args = fc.oneof(
      fc.jsonValue(),
      fc.string({ maxLength: 60 }),
      fc.record(
        {
          action: fc.oneof(actions, weird),
          artifact_id: fc.oneof(fc.string({ maxLength: 70 }), weird),
          offset: weird,
          limit: weird,
          query: fc.oneof(fc.string({ maxLength: 50 }), huge, weird),
          session_id: weird,
          operations: weird,
          include_retired: weird,
        },
        { requiredKeys: [] },
      ),
      fc.record({ action: actions }).map((a) => JSON.stringify(a)),
    );
    await fc.assert(
      fc.asyncProperty(args, fc.oneof(fc.string({ maxLength: 20 }), fc.constant('')), async (a, sessionId) => {
        figures.recoveryCalls++;
        const out = await tt.recoveryTool.handle(a, { sessionId });
        const parsed = JSON.parse(out) as Record<string, unknown>;
        expect(typeof parsed).toBe('object');
        const error = parsed['error'] as { code?: unknown; message?: unknown } | undefined;
        if (error !== undefined) {
          expect(typeof error.code).toBe('string');
          expect(typeof error.message).toBe('string');
        }
      }),
      { numRuns: 150, seed: 8_2028 },
    );
  });
});
