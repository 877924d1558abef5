/**
 * Each invariant catches the operator that breaks it, with a report naming the invariant, and
 * passes the identity operator (so none of these checks can pass or fail vacuously).
 */
import { map, type OperatorFunction } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codePoints } from '../../src/measure/index.js';
import { stepOperator } from '../../src/operator-kit.js';
import { createReceipt, renderReceipt } from '../../src/receipts/index.js';
import { advance, type ProviderRequest, type Step, type ToolResult } from '../../src/step.js';
import {
  assertInvariant,
  decisionsChanged,
  growingSession,
  invariants,
  requestStream,
  toolResultStream,
  withDeps,
  type InvariantName,
} from '../../src/testing/index.js';
import { artifactIdFor, createVault, sha256Hex } from '../../src/vault/index.js';
import type { Vault } from '../../src/vault/types.js';

let vault: Vault;
beforeAll(async () => {
  vault = await createVault({ path: ':memory:' });
});
afterAll(async () => {
  await vault.close();
});

const applied = (stage: string) => ({ stage, kind: 'applied' as const, reason: 'test' });
const identity = <T>(): OperatorFunction<Step<T>, Step<T>> => stepOperator<T>('identity', () => () => undefined);
const results = () => toolResultStream({ maxLength: 3, sizes: ['tiny', 'medium'] });

/** Assert that the property fails, and that the report names the invariant and a counterexample. */
async function expectCaught(name: InvariantName, run: Promise<void>, detail: RegExp): Promise<string> {
  const error = await run.then(
    () => undefined,
    (e: unknown) => e as Error,
  );
  expect(error, `invariant ${name} was not caught`).toBeInstanceOf(Error);
  if (process.env['TT_SHOW_REPORTS'] === '1') console.log(error!.message);
  const message = error!.message;
  expect(message).toContain('Counterexample:');
  expect(message).toContain(`invariant "${name}" broken at `);
  expect(message).toMatch(detail);
  return message;
}

describe('unchanged-or-smaller', () => {
  const enlarges = stepOperator<ToolResult>(
    'enlarge',
    () => (s) => advance(s, { ...s.value, content: `${s.value.content}\n(checked)` }, applied('enlarge')),
  );

  it('catches an operator that enlarges its output', async () => {
    const message = await expectCaught(
      'unchanged-or-smaller',
      assertInvariant(invariants.unchangedOrSmaller(enlarges, { vault, inputs: results() })),
      /step 0 \(applied by enlarge\): output changed but is \d+ chars, input \d+ chars/u,
    );
    expect(message).toMatch(/first change \$\.content/u);
  });

  it('passes the identity operator', async () => {
    await assertInvariant(invariants.unchangedOrSmaller(identity<ToolResult>(), { vault, inputs: results() }), {
      numRuns: 10,
    });
  });
});

describe('never-mutates', () => {
  // Plain rxjs map: the write to the frozen input throws and errors the stream.
  const mutatesWithMap: OperatorFunction<Step<ToolResult>, Step<ToolResult>> = map((s) => {
    (s.value.args as Record<string, unknown>)['seen'] = true;
    return s;
  });
  // stepOperator: the frozen write fails open, so only the plain run's snapshot comparison sees it.
  const mutatesQuietly = stepOperator<ToolResult>('tag', () => (s) => {
    (s.value as { content: string }).content = s.value.content.trimEnd();
    return s;
  });

  it('catches an operator that writes to the caller object', async () => {
    await expectCaught(
      'never-mutates',
      assertInvariant(invariants.neverMutates(mutatesWithMap, { vault, inputs: results() })),
      /the caller's object was mutated: \$\.args\.seen: added/u,
    );
  });

  it('catches a fail-open operator that writes to the caller object', async () => {
    const inputs = toolResultStream({ maxLength: 2, sizes: ['tiny'] }).map((rs) =>
      rs.map((r) => ({ ...r, content: `${r.content}  \n` })),
    );
    await expectCaught(
      'never-mutates',
      assertInvariant(invariants.neverMutates(mutatesQuietly, { vault, inputs })),
      /mutated: \$\.content: a string of \d+ code points/u,
    );
  });

  it('passes the identity operator', async () => {
    await assertInvariant(invariants.neverMutates(identity<ToolResult>(), { vault, inputs: results() }), {
      numRuns: 10,
    });
  });
});

describe('recovers-exactly', () => {
  // Renders a perfect-looking receipt but never writes the artifact.
  const losesWrite = stepOperator<ToolResult>('lose', () => (s) => {
    const content = s.value.content;
    const receipt = renderReceipt(
      createReceipt(artifactIdFor(content), s.value.name, codePoints(content), sha256Hex(content)),
    );
    return advance(s, { ...s.value, content: receipt }, applied('lose'));
  });
  // Writes the artifact, then claims a different size in the receipt.
  const wrongChars = stepOperator<ToolResult>('miscount', () => async (s) => {
    const put = await vault.put({ content: s.value.content });
    return advance(
      s,
      { ...s.value, content: renderReceipt(createReceipt(put.artifactId, s.value.name, put.chars + 1, put.sha256)) },
      applied('miscount'),
    );
  });

  it('catches a receipt without a vault write', async () => {
    await expectCaught(
      'recovers-exactly',
      assertInvariant(invariants.recoversExactly(losesWrite, { vault, inputs: results() })),
      /names artifact a_[0-9a-f]{32} but the vault cannot return it \(ArtifactNotFoundError/u,
    );
  });

  it('catches a receipt whose size does not match its artifact', async () => {
    await expectCaught(
      'recovers-exactly',
      assertInvariant(invariants.recoversExactly(wrongChars, { vault, inputs: results() })),
      /says chars=\d+ but the artifact has \d+/u,
    );
  });

  it('catches a changed tool result with nothing recoverable', async () => {
    const truncates = stepOperator<ToolResult>(
      'cut',
      () => (s) =>
        s.value.content.length > 20
          ? advance(s, { ...s.value, content: s.value.content.slice(0, 20) }, applied('cut'))
          : undefined,
    );
    await expectCaught(
      'recovers-exactly',
      assertInvariant(invariants.recoversExactly(truncates, { vault, inputs: results() })),
      /no artifact it names holds the exact original/u,
    );
  });

  it('passes the identity operator', async () => {
    await assertInvariant(invariants.recoversExactly(identity<ToolResult>(), { vault, inputs: results() }), {
      numRuns: 10,
    });
  });
});

describe('fails-open', () => {
  // Plain rxjs map with no fail-open handling: the counter's throw errors the stream.
  const throwsWithMap = withDeps<ToolResult>(({ counter }) =>
    map((s) => {
      const tokens = counter?.count(s.value.content) ?? 0;
      return tokens > 1_000_000 ? s : s;
    }),
  );
  // Swallows the fault and reduces anyway: output differs although every dependency threw.
  const ignoresFault = withDeps<ToolResult>(({ vault: v }) =>
    stepOperator<ToolResult>('ignore', () => async (s) => {
      await v.put({ content: s.value.content }).catch(() => undefined);
      return advance(s, { ...s.value, content: s.value.content.slice(0, 1) }, applied('ignore'));
    }),
  );

  it('catches an operator that errors the stream when a dependency throws', async () => {
    await expectCaught(
      'fails-open',
      assertInvariant(invariants.failsOpen(throwsWithMap, { vault, inputs: results() })),
      /the stream: errored with InjectedFault \(E_INJECTED_FAULT\)/u,
    );
  });

  it('catches an operator that reduces although its dependencies failed', async () => {
    await expectCaught(
      'fails-open',
      assertInvariant(invariants.failsOpen(ignoresFault, { vault, inputs: results() })),
      /yet the output differs from the input|no artifact it names/u,
    );
  });

  it('passes an operator that fails open', async () => {
    const careful = withDeps<ToolResult>(({ vault: v }) =>
      stepOperator<ToolResult>('careful', () => async (s) => {
        const put = await v.put({ content: s.value.content });
        return advance(
          s,
          { ...s.value, content: renderReceipt(createReceipt(put.artifactId, s.value.name, put.chars, put.sha256)) },
          applied('careful'),
        );
      }),
    );
    await assertInvariant(invariants.failsOpen(careful, { vault, inputs: results() }), { numRuns: 10 });
  });

  it('refuses a plain operator it cannot inject faults into', () => {
    expect(() => invariants.failsOpen(identity<ToolResult>(), { vault, inputs: results() })).toThrow(/withDeps/u);
  });
});

describe('releases-on-unsubscribe', () => {
  const hang = ['-e', 'setInterval(() => {}, 1000)'];
  // Spawns a child per Step and waits for it, but never kills it when the subscriber leaves.
  const leaks = withDeps<ToolResult>(({ spawn }) =>
    stepOperator<ToolResult>(
      'leak',
      () => (s) =>
        new Promise<Step<ToolResult>>((resolve) => spawn(process.execPath, hang).once('exit', () => resolve(s))),
    ),
  );
  const kills = withDeps<ToolResult>(({ spawn }) =>
    stepOperator<ToolResult>('kill', () => (s, signal) => {
      const child = spawn(process.execPath, hang);
      signal.addEventListener('abort', () => child.kill('SIGKILL'), { once: true });
      return new Promise<Step<ToolResult>>((resolve) => child.once('exit', () => resolve(s)));
    }),
  );

  it('catches an operator that leaks a child process on unsubscribe, then kills the leaked child', async () => {
    const message = await expectCaught(
      'releases-on-unsubscribe',
      assertInvariant(invariants.releasesOnUnsubscribe(leaks, { vault, inputs: results(), settleMs: 500 }), {
        numRuns: 3,
        endOnFailure: true,
      }),
      /1 resource\(s\) still live: child pid \d+/u,
    );
    expect(message).toMatch(/unsubscribe after \d+ input\(s\)/u);
    const pid = Number(/child pid (\d+)/u.exec(message)![1]);
    const alive = (): boolean => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    for (let i = 0; i < 200 && alive(); i++) await new Promise((r) => setTimeout(r, 10));
    expect(alive()).toBe(false);
  });

  it('passes an operator that kills its child on unsubscribe', async () => {
    await assertInvariant(invariants.releasesOnUnsubscribe(kills, { vault, inputs: results(), settleMs: 2_000 }), {
      numRuns: 5,
    });
  });
});

describe('cache-stable', () => {
  // Moves the last conversation item to the front: every new request rewrites the earlier prefix.
  const reorders = stepOperator<ProviderRequest>('rotate', () => (s) => {
    const key = Array.isArray(s.value['input']) ? 'input' : 'messages';
    const list = s.value[key] as unknown[];
    if (list.length < 2) return undefined;
    return advance(s, { ...s.value, [key]: [list[list.length - 1], ...list.slice(0, -1)] }, applied('rotate'));
  });

  it('catches an operator that reorders earlier messages', async () => {
    await expectCaught(
      'cache-stable',
      assertInvariant(
        invariants.cacheStable(reorders, { vault, inputs: growingSession({ sizes: ['tiny'], maxTurns: 3 }) }),
      ),
      /request \d+ of \d+ \(applied by rotate\): the compiled request does not start with compiled request \d+: (messages|input)\[\d+\]/u,
    );
  });

  it('catches a prefix rewrite that reports an unchanged decision under decisionsChanged boundaries', async () => {
    await expectCaught(
      'cache-stable',
      assertInvariant(
        invariants.cacheStable(reorders, {
          vault,
          inputs: growingSession({ sizes: ['tiny'], maxTurns: 3 }),
          isBoundary: decisionsChanged(),
        }),
      ),
      /does not start with compiled request/u,
    );
  });

  it('accepts a rewrite at a declared boundary', async () => {
    await assertInvariant(
      invariants.cacheStable(reorders, {
        vault,
        inputs: growingSession({ sizes: ['tiny'], maxTurns: 3 }),
        isBoundary: () => true,
      }),
      { numRuns: 10 },
    );
  });

  it('passes the identity operator', async () => {
    await assertInvariant(
      invariants.cacheStable(identity<ProviderRequest>(), {
        vault,
        inputs: growingSession({ sizes: ['tiny'], maxTurns: 3 }),
      }),
      { numRuns: 10 },
    );
  });
});

describe('valid-roles', () => {
  // Drops tool outputs (Chat `tool`, Responses outputs, Anthropic tool_result turns): calls go unanswered.
  const dropsOutputs = stepOperator<ProviderRequest>('drop', () => (s) => {
    const key = Array.isArray(s.value['input']) ? 'input' : 'messages';
    const list = (s.value[key] as Record<string, unknown>[]).filter(
      (m) =>
        m['role'] !== 'tool' &&
        m['type'] !== 'function_call_output' &&
        !(Array.isArray(m['content']) && (m['content'] as { type?: string }[]).some((b) => b.type === 'tool_result')),
    );
    return advance(s, { ...s.value, [key]: list }, applied('drop'));
  });

  it('catches an operator that orphans tool calls', async () => {
    await expectCaught(
      'valid-roles',
      assertInvariant(
        invariants.validRoles(dropsOutputs, { vault, inputs: requestStream({ sizes: ['tiny'], maxLength: 2 }) }),
      ),
      /request \d+ \((chat|responses|anthropic), applied by drop\): /u,
    );
  });

  it('passes the identity operator', async () => {
    await assertInvariant(
      invariants.validRoles(identity<ProviderRequest>(), { vault, inputs: requestStream({ sizes: ['tiny'] }) }),
      { numRuns: 15 },
    );
  });
});

describe('prefix-kept', () => {
  // Folds the first user message into a note: the task leaves the prefix (turn collapse did this).
  const foldsTask = stepOperator<ProviderRequest>('fold', () => (s) => {
    const key = Array.isArray(s.value['input']) ? 'input' : 'messages';
    const list = s.value[key] as Record<string, unknown>[];
    const i = list.findIndex((m) => m['role'] === 'user');
    if (i === -1) return undefined;
    const copy = list.slice();
    copy[i] = { ...list[i], content: '[collapsed: see the vault]' };
    return advance(s, { ...s.value, [key]: copy }, applied('fold'));
  });

  it('catches an operator that replaces a message of the instruction prefix', async () => {
    await expectCaught(
      'prefix-kept',
      assertInvariant(
        invariants.prefixKept(foldsTask, { vault, inputs: growingSession({ sizes: ['tiny'], maxTurns: 2 }) }),
      ),
      /the instruction prefix changed: conversation item \d+ of the prefix/u,
    );
  });

  it('passes the identity operator', async () => {
    await assertInvariant(
      invariants.prefixKept(identity<ProviderRequest>(), {
        vault,
        inputs: growingSession({ sizes: ['tiny'], maxTurns: 2 }),
      }),
      { numRuns: 10 },
    );
  });
});

describe('actions-kept', () => {
  // Empties every tool call's arguments (the model can no longer see what it tried).
  const dropsArguments = stepOperator<ProviderRequest>('forget', () => (s) => {
    const key = Array.isArray(s.value['input']) ? 'input' : 'messages';
    const list = (s.value[key] as Record<string, unknown>[]).map((m) => {
      if (Array.isArray(m['tool_calls']))
        return {
          ...m,
          tool_calls: (m['tool_calls'] as Record<string, unknown>[]).map((c) => ({
            ...c,
            function: { ...(c['function'] as object), arguments: '{}' },
          })),
        };
      if (m['type'] === 'function_call') return { ...m, arguments: '{}' };
      if (Array.isArray(m['content']))
        return {
          ...m,
          content: (m['content'] as Record<string, unknown>[]).map((b) =>
            b['type'] === 'tool_use' ? { ...b, input: {} } : b,
          ),
        };
      return m;
    });
    return advance(s, { ...s.value, [key]: list }, applied('forget'));
  });

  it('catches an operator that changes tool-call arguments', async () => {
    await expectCaught(
      'actions-kept',
      assertInvariant(
        invariants.actionsKept(dropsArguments, { vault, inputs: growingSession({ sizes: ['tiny'], maxTurns: 3 }) }),
      ),
      /an assistant action of the input is missing: tool call/u,
    );
  });

  it('passes the identity operator', async () => {
    await assertInvariant(
      invariants.actionsKept(identity<ProviderRequest>(), {
        vault,
        inputs: growingSession({ sizes: ['tiny'], maxTurns: 2 }),
      }),
      { numRuns: 10 },
    );
  });
});

describe('no-dangling-reference', () => {
  // Replaces the newest tool output with a delta against an output the request never showed.
  const danglingDelta = stepOperator<ProviderRequest>('delta', () => (s) => {
    const key = Array.isArray(s.value['input']) ? 'input' : 'messages';
    const list = s.value[key] as Record<string, unknown>[];
    const i = list.findLastIndex((m) => m['role'] === 'tool' || m['type'] === 'function_call_output');
    if (i === -1) return undefined;
    const note = `[Token Terminator temporal delta: no output changes since the previous execution | current=a_${'1'.repeat(32)} | previous=a_${'2'.repeat(32)} | recover exact current output with token_terminator action=artifact_get]`;
    const copy = list.slice();
    copy[i] = list[i]!['role'] === 'tool' ? { ...list[i], content: note } : { ...list[i], output: note };
    return advance(s, { ...s.value, [key]: copy }, applied('delta'));
  });
  // Replaces every output by a receipt the conversation never saw the content of.
  const leasesUnseen = stepOperator<ProviderRequest>('lease', () => (s) => {
    const key = Array.isArray(s.value['input']) ? 'input' : 'messages';
    const list = (s.value[key] as Record<string, unknown>[]).map((m) => {
      if (m['role'] !== 'tool' || typeof m['content'] !== 'string') return m;
      const content = m['content'] as string;
      return {
        ...m,
        content: renderReceipt(createReceipt(artifactIdFor(content), 'tool', codePoints(content), sha256Hex(content))),
      };
    });
    return advance(s, { ...s.value, [key]: list }, applied('lease'));
  });
  const chatSessions = growingSession({ sizes: ['tiny'], maxTurns: 3, formats: ['chat', 'responses'] });

  it('catches a delta against an output the request does not show', async () => {
    await expectCaught(
      'no-dangling-reference',
      assertInvariant(invariants.noDanglingReference(danglingDelta, { vault, inputs: chatSessions })),
      /is a delta against a_2{32}, which this request does not show/u,
    );
  });

  it('catches a receipt for content the conversation was never shown', async () => {
    await expectCaught(
      'no-dangling-reference',
      assertInvariant(
        invariants.noDanglingReference(leasesUnseen, {
          vault,
          inputs: growingSession({ sizes: ['tiny'], maxTurns: 3, formats: ['chat'] }),
        }),
      ),
      /which this conversation was never shown/u,
    );
  });

  it('passes the identity operator', async () => {
    await assertInvariant(
      invariants.noDanglingReference(identity<ProviderRequest>(), { vault, inputs: chatSessions }),
      { numRuns: 10 },
    );
  });
});
