/**
 * Digests keep what an agent acts on, as a property of the testing kit over growing sessions of
 * all three wire formats (function-calling and text-protocol agents): every failing test id and
 * diagnostic line of a failing run is in the digest its output becomes, up to the documented bound
 * of 50 lines, and the rest is counted. The outputs are failing runs of 0 to 70 failures; the
 * thresholds are lowered so that they get digested, and the inline limit raised so that the digest
 * is made of the output itself (not of a bounded view).
 */
import { readFileSync } from 'node:fs';
import { firstValueFrom, from, lastValueFrom, toArray } from 'rxjs';
import { describe, expect } from 'vitest';
import { fc, it, test } from '@fast-check/vitest';
import { compressToolResult } from '../../operators/compress-tool-result.js';
import { compactTerminal } from '../../src/compact/index.js';
import { DIGEST_MAX_DIAGNOSTICS, failingTestIds, renderDigest } from '../../src/compile/digest.js';
import { readRequest } from '../../src/model/index.js';
import { createTerminator } from '../../src/runtime/index.js';
import { createStep, type ProviderRequest, type ToolResult } from '../../src/step.js';
import {
  failingOutput,
  growingSession,
  missingDiagnostics,
  missingFailureLines,
  testInvariants,
  verboseRun,
  withDeps,
  type RequestOptions,
} from '../../src/testing/index.js';
import { propertyDeps } from '../support/properties.js';

const { vault, counter } = await propertyDeps();

const shapes: RequestOptions = { maxTurns: 5, protocol: 'both', outputs: failingOutput({ maxFailures: 70 }) };
// What a digest keeps does not depend on when the history policy makes one; the lazy policy (a digest
// one turn after exposure) makes the most of them, so the property sees every format's digests.
const overrides = {
  minArtifactChars: 300,
  maxInlineChars: 200_000,
  contextMinVaultChars: 150,
  historyPolicy: 'lazy',
} as const;

const RECEIPT =
  '[Token Terminator artifact a_0123456789abcdef0123456789abcdef | tool=terminal | chars=1 | recover with token_terminator action=artifact_get]';
const request = (content: string): ProviderRequest => ({
  model: 'm',
  messages: [
    { role: 'user', content: 'go' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'terminal', arguments: '{}' } }],
    },
    { role: 'tool', tool_call_id: 'c1', content },
  ],
});

describe('digests keep every failing test id and diagnostic line', () => {
  const pipeline = withDeps<ProviderRequest>(async ({ vault: v, counter: c }) => {
    const tt = await createTerminator({
      vault: v,
      ...(c === undefined ? {} : { counter: c }),
      env: {},
      overrides,
      metrics: false,
    });
    return { operator: tt.requests(), dispose: () => tt.close() };
  });
  testInvariants(test, pipeline, {
    vault,
    counter,
    inputs: growingSession(shapes),
    only: ['diagnostics-kept'],
    params: { numRuns: 25 },
  });

  it('the property is not vacuous: failing runs of every format get digested', async () => {
    await using tt = await createTerminator({ vault, counter, env: {}, overrides, metrics: false });
    const formats = new Set<string>();
    let withIds = 0;
    for (const [k, session] of fc.sample(growingSession(shapes), { numRuns: 30, seed: 5 }).entries()) {
      const outs = await lastValueFrom(
        from(session.map((r, i) => createStep(r, { sessionId: `diag-${k}`, requestId: `r${i}` }))).pipe(
          tt.requests(),
          toArray(),
        ),
      );
      outs.forEach((out, i) => {
        expect(missingDiagnostics(session[i]!, out.value)).toEqual([]);
        for (const slot of readRequest(out.value).slots) {
          const text = slot.kind === 'user' ? slot.text : typeof slot.value === 'string' ? slot.value : undefined;
          if (text?.startsWith('[Token Terminator digest') !== true) continue;
          formats.add('messages' in out.value ? ('system' in out.value ? 'anthropic' : 'chat') : 'responses');
          if (/ \| \d+ failed\]/.test(text.split('\n')[0]!)) withIds++;
        }
      });
    }
    expect(withIds).toBeGreaterThan(0);
    expect([...formats].sort()).toEqual(['anthropic', 'chat', 'responses']);
  });

  // The pipeline digests the outputs its cache economics pick; every size of failing run, past the
  // bound included, is held to the same check through the digest itself.
  test.prop([failingOutput({ maxFailures: 90 })], { numRuns: 60 })(
    'a digest of any failing run keeps every id and diagnostic line up to the bound, then counts the rest',
    (output) => {
      const digest = renderDigest(output, RECEIPT, { diagnosticChars: 400 });
      expect(missingDiagnostics(request(output), request(digest))).toEqual([]);
    },
  );

  it('runs past the bound are generated, and their digests count what they leave out', () => {
    const past = fc
      .sample(failingOutput({ maxFailures: 90 }), { numRuns: 60, seed: 9 })
      .map((o) => renderDigest(o, RECEIPT, { diagnosticChars: 400 }))
      .filter((d) => d.includes('more diagnostic line'));
    expect(past.length).toBeGreaterThan(0);
  });

  it('the check finds a digest that lost a failing test id', () => {
    const output = ['$ pytest', 'FAILED tests/test_a.py::test_one - x', 'FAILED tests/test_a.py::test_two - y'].join(
      '\n',
    );
    expect(failingTestIds(output.split('\n'))).toHaveLength(2);
    const lossy = '[Token Terminator digest | 3 lines]\n$ pytest\nFAILED tests/test_a.py::test_one - x\nRECEIPT';
    expect(missingDiagnostics(request(output), request(lossy)).join('\n')).toContain('test_two');
    expect(DIGEST_MAX_DIAGNOSTICS).toBeGreaterThanOrEqual(50);
  });
});

describe('first views keep every failure line of a verbose test run', () => {
  const compress = compressToolResult({ vault, counter });
  const firstView = async (name: string, command: string, output: string, exitCode: number): Promise<string> => {
    const result: ToolResult = { callId: 'c1', name, args: { command }, content: output, exitCode };
    const out = await firstValueFrom(from([createStep(result, { sessionId: 'verbose' })]).pipe(compress, toArray()));
    return out[0]!.value.content;
  };

  // Judged by replay's ruler (src/measure/diagnostic-ruler.ts), not by the compactors' classifier.
  test.prop([verboseRun()], { numRuns: 60 })(
    'every failure line of a generated verbose pytest, vitest, go or cargo run is in its first view',
    async (run) => {
      const view = await firstView('bash', run.command, run.output, run.exitCode);
      expect(missingFailureLines(run.output, view)).toEqual([]);
    },
  );

  it('the generated runs are large enough to be compacted, with per-test failure lines among many passing ones', () => {
    const runs = fc.sample(verboseRun(), { numRuns: 40, seed: 3 });
    expect(new Set(runs.map((r) => r.runner)).size).toBe(4);
    const compacted = runs.filter((r) => r.output.length > 6000);
    expect(compacted.length).toBeGreaterThan(10);
    for (const r of runs.filter((x) => x.runner === 'pytest'))
      expect(r.output).toMatch(/^tests\/\S+::\S+ FAILED +\[ *\d+%\]$/m);
  });

  it('a captured verbose pytest run keeps every FAILED progress line, failure detail and summary line', async () => {
    const output = readFileSync(new URL('../fixtures/readme-setups/pytest-30k.txt', import.meta.url), 'utf8');
    const progress = output.split('\n').filter((l) => /::\S+ FAILED\s+\[/.test(l));
    expect(progress.length).toBeGreaterThanOrEqual(10);
    const view = compactTerminal({ command: 'python -m pytest -v tests', output, exitCode: 1 }).text;
    expect(view.length).toBeLessThan(output.length / 2);
    const lines = new Set(view.split('\n'));
    for (const line of progress) expect(lines, line).toContain(line);
    expect(missingFailureLines(output, view)).toEqual([]);
    const through = await firstView('bash', 'python -m pytest -v tests', output, 1);
    expect(missingFailureLines(output, through)).toEqual([]);
  });
});
