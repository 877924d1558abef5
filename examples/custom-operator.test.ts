/**
 * Property tests of the example operator with the testing kit. In your project:
 * `import { ... } from 'token-terminator/testing'`.
 */
import { test } from '@fast-check/vitest';
import { firstValueFrom, of, toArray } from 'rxjs';
import { afterAll, describe, expect, it } from 'vitest';
import { createStep, type ToolResult, referencedArtifacts, createVault } from 'token-terminator';
import {
  readArtifact,
  testInvariants,
  toolResultStream,
  withDeps,
  type TestInvariantsOptions,
} from 'token-terminator/testing';
import { dropNoisyOutput } from './custom-operator.js';

const vault = await createVault({ path: ':memory:' });
afterAll(async () => {
  await vault.close();
});

describe('dropNoisyOutput', () => {
  it('replaces a large noisy output with a receipt that recovers it exactly', async () => {
    const content = 'poll 1/400 ok\n'.repeat(400);
    const result: ToolResult = { callId: 'c1', name: 'noisy_probe', args: {}, content };
    const [out] = await firstValueFrom(
      of(createStep(result, { sessionId: 's' })).pipe(
        dropNoisyOutput({ tools: ['noisy_probe'], vault, maxChars: 2_000 }),
        toArray(),
      ),
    );
    expect(out!.value.content).toMatch(
      /^\[Token Terminator artifact a_[0-9a-f]{32} \| tool=noisy_probe \| chars=5600 /u,
    );
    const [id] = referencedArtifacts(out!.value.content);
    expect(await readArtifact(vault, id!)).toBe(content);
    expect(result.content).toBe(content);
  });

  it('rejects bad options when built, naming the operator', () => {
    expect(() => dropNoisyOutput({ tools: [], vault })).toThrow(/^dropNoisyOutput: tools/u);
    expect(() => dropNoisyOutput({ tools: ['x'], vault, maxChars: 10 })).toThrow(/^dropNoisyOutput: maxChars/u);
  });
});

describe('dropNoisyOutput invariants (testing kit)', () => {
  const options: TestInvariantsOptions<ToolResult> = {
    vault,
    inputs: toolResultStream({ tools: ['noisy_probe', 'terminal'], maxLength: 4 }),
    only: ['unchanged-or-smaller', 'never-mutates', 'recovers-exactly', 'fails-open', 'releases-on-unsubscribe'],
    params: { numRuns: 15 },
    settleMs: 1_000,
  };
  // The probe's tracked timers let the kit see that unsubscribing clears the deadline timer
  // (10 s here, far longer than the kit waits, so a missed clear would be reported).
  const op = withDeps<ToolResult>(({ vault: v, probe }) =>
    dropNoisyOutput({ tools: ['noisy_probe'], vault: v, maxChars: 2_000, timeoutMs: 10_000, timers: probe }),
  );
  testInvariants(test, op, options);
});
