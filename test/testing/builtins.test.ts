/**
 * Every built-in operator and the composed default pipelines (createTerminator) against every
 * applicable invariant of the testing kit, with a real SQLite vault and the exact o200k counter.
 *
 * Not applicable, by design: unchanged-or-smaller for rewriteTerminalCommand (an RTK rewrite makes
 * the command longer; its saving is in the output RTK filters) and for capOutputBudget (it sets an
 * output cap, it does not reduce); strict fails-open for capOutputBudget (a failing exact counter
 * falls back to a rough estimate plus a margin, as documented). cache-stable and valid-roles apply
 * to request operators only.
 */
import { test } from '@fast-check/vitest';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { firstValueFrom, from, toArray, type OperatorFunction } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { capOutputBudget } from '../../operators/cap-output-budget.js';
import { compressToolResult } from '../../operators/compress-tool-result.js';
import { rewriteTerminalCommand } from '../../operators/rewrite-terminal-command.js';
import { deltaRepeatedOutput } from '../../operators/delta-repeated-output.js';
import { createTerminator } from '../../src/runtime/index.js';
import { createStep, type ProviderRequest, type Step, type ToolCall, type ToolResult } from '../../src/step.js';
import {
  decisionsChanged,
  growingSession,
  requestStream,
  testInvariants,
  toolCallStream,
  toolResultStream,
  withDeps,
  type InvariantName,
  type KitDeps,
} from '../../src/testing/index.js';
import { propertyDeps, TOOL_INVARIANTS } from '../support/properties.js';

const { vault, counter } = await propertyDeps();

const RTK = fileURLToPath(new URL('../fixtures/rtk/rtk', import.meta.url));
const params = { numRuns: 12 };
const results = toolResultStream({ maxLength: 5 });
const CWDS = [process.cwd()];
const terminalResults = toolResultStream({ maxLength: 6, tools: ['terminal'], sizes: ['medium', 'large'] });
const rtkCalls = toolCallStream({
  tools: ['terminal', 'read_file'],
  commands: ['git status', 'cargo test', 'stub-exit1 x', 'stub-garbage', 'rtk ls', 'ls -la'],
  cwds: CWDS,
});

/** Reasons of the `applied` decisions an operator takes over a fixed sample of the kit's inputs. */
async function appliedReasons<T>(
  op: OperatorFunction<Step<T>, Step<T>>,
  inputs: fc.Arbitrary<readonly T[]>,
  runs = 15,
): Promise<Set<string>> {
  const reasons = new Set<string>();
  for (const [k, values] of fc.sample(inputs, { numRuns: runs, seed: 42 }).entries()) {
    const steps = values.map((v, i) => createStep(v, { sessionId: `coverage-${k}-${Date.now()}`, requestId: `r${i}` }));
    for (const out of await firstValueFrom(from(steps).pipe(op, toArray())))
      for (const d of out.decisions) if (d.kind === 'applied') reasons.add(`${d.stage}:${d.reason}`);
  }
  return reasons;
}

// The properties below would pass vacuously if the generated inputs never triggered a reduction.
describe('the kit inputs exercise the built-ins', () => {
  it('compressToolResult compacts native and terminal results', async () => {
    const reasons = await appliedReasons(compressToolResult({ vault, env: {} }), results);
    expect([...reasons].sort()).toEqual([
      'compressToolResult:native_compacted',
      'compressToolResult:terminal_compacted',
    ]);
  });
  it('deltaRepeatedOutput shows unchanged and changed repeats', async () => {
    const reasons = await appliedReasons(deltaRepeatedOutput({ vault, env: {} }), terminalResults, 25);
    expect([...reasons].sort()).toEqual(['deltaRepeatedOutput:changed', 'deltaRepeatedOutput:unchanged']);
  });
  it('rewriteTerminalCommand rewrites through the stub', async () => {
    const reasons = await appliedReasons(rewriteTerminalCommand({ rtkPath: RTK, env: {} }), rtkCalls);
    expect([...reasons]).toEqual(['rewriteTerminalCommand:rewritten']);
  });
});
const requests = requestStream({ maxLength: 2 });

describe('compressToolResult', () => {
  const op = withDeps<ToolResult>(({ vault: v, counter: c }) =>
    compressToolResult({ vault: v, ...(c === undefined ? {} : { counter: c }), env: {} }),
  );
  testInvariants(test, op, { vault, counter, inputs: results, only: TOOL_INVARIANTS, params });
});

describe('compressToolResult (aggressive, low thresholds)', () => {
  const op = withDeps<ToolResult>(({ vault: v, counter: c }) =>
    compressToolResult({
      vault: v,
      ...(c === undefined ? {} : { counter: c }),
      mode: 'aggressive',
      nativeMinChars: 1_000,
      nativeMaxChars: 1_000,
      terminalMinChars: 200,
      env: {},
    }),
  );
  testInvariants(test, op, { vault, counter, inputs: results, only: TOOL_INVARIANTS, params });
});

describe('deltaRepeatedOutput', () => {
  const op = withDeps<ToolResult>(({ vault: v, counter: c }) =>
    deltaRepeatedOutput({ vault: v, ...(c === undefined ? {} : { counter: c }), env: {} }),
  );
  testInvariants(test, op, { vault, counter, inputs: terminalResults, only: TOOL_INVARIANTS, params });
});

describe('rewriteTerminalCommand (stub rtk)', () => {
  const build = (timeoutMs: number) =>
    withDeps<ToolCall>(({ spawn }: KitDeps) =>
      rewriteTerminalCommand({ rtkPath: RTK, env: {}, timeoutMs, spawn: spawn as never }),
    );
  testInvariants(test, build(2_000), {
    vault,
    inputs: rtkCalls,
    only: ['never-mutates', 'recovers-exactly', 'fails-open'],
    params,
  });
  // A hung rtk with a deadline far beyond the kit's wait: only the kill on unsubscribe frees it.
  const hanging = toolCallStream({
    tools: ['terminal'],
    commands: ['stub-hang one', 'stub-hang two', 'git status'],
    cwds: CWDS,
  });
  testInvariants(test, build(60_000), {
    vault,
    inputs: hanging,
    only: ['releases-on-unsubscribe'],
    params: { numRuns: 6 },
    settleMs: 2_000,
  });
});

describe('capOutputBudget', () => {
  const context = { route: { model: 'gpt-4o', contextWindow: 128_000 } };
  const op = withDeps<ProviderRequest>(({ counter: c }) => capOutputBudget(c === undefined ? {} : { counter: c }));
  const only: InvariantName[] = [
    'never-mutates',
    'recovers-exactly',
    'fails-open',
    'releases-on-unsubscribe',
    'valid-roles',
  ];
  testInvariants(test, op, { vault, counter, inputs: requests, context, only, params, expectUnchanged: false });
  testInvariants(test, op, {
    vault,
    counter,
    inputs: growingSession({ maxTurns: 3 }),
    context,
    only: ['cache-stable'],
    params,
  });
});

describe('createTerminator (default pipelines)', () => {
  const terminator = async ({ vault: v, counter: c }: KitDeps, overrides: { outputCap?: boolean } = {}) =>
    createTerminator({ vault: v, ...(c === undefined ? {} : { counter: c }), env: {}, overrides });
  const toolResults = withDeps<ToolResult>(async (deps) => {
    const tt = await terminator(deps);
    return { operator: tt.toolResults(), dispose: () => tt.close() };
  });
  const toolCalls = withDeps<ToolCall>(async (deps) => {
    const tt = await terminator(deps);
    return { operator: tt.toolCalls(), dispose: () => tt.close() };
  });
  const requestPipeline = (overrides: { outputCap?: boolean } = {}) =>
    withDeps<ProviderRequest>(async (deps) => {
      const tt = await terminator(deps, overrides);
      return { operator: tt.requests(), dispose: () => tt.close() };
    });
  const context = { route: { model: 'gpt-4o', contextWindow: 128_000 } };
  testInvariants(test, toolResults, { vault, counter, inputs: results, only: TOOL_INVARIANTS, params });
  testInvariants(test, toolCalls, {
    vault,
    inputs: toolCallStream({ cwds: CWDS }),
    only: ['never-mutates', 'recovers-exactly', 'fails-open', 'releases-on-unsubscribe'],
    params,
  });
  // With the output cap on, a request may gain a cap field: sizes are checked with the cap off.
  testInvariants(test, requestPipeline(), {
    vault,
    counter,
    context,
    inputs: requests,
    only: ['never-mutates', 'recovers-exactly', 'fails-open', 'releases-on-unsubscribe', 'valid-roles'],
    params,
    expectUnchanged: false,
  });
  testInvariants(test, requestPipeline({ outputCap: false }), {
    vault,
    counter,
    context,
    inputs: requests,
    only: ['unchanged-or-smaller', 'fails-open'],
    params,
  });
  testInvariants(test, requestPipeline(), {
    vault,
    counter,
    context,
    inputs: growingSession({ maxTurns: 4 }),
    only: ['cache-stable'],
    params,
    isBoundary: decisionsChanged(),
  });
});
