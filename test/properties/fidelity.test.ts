/**
 * The fidelity contract as properties (docs/fidelity.md), over growing sessions of all three wire
 * formats, through the request pipeline a Terminator builds, in every mode that is not an opt-in:
 * the instruction prefix and every assistant action reach the model verbatim, and nothing refers
 * to what the conversation was not shown. Thresholds are lowered so that generated sessions
 * (outputs up to 6,000 chars) get bounded views, digests and receipts.
 */
import { from, lastValueFrom, toArray } from 'rxjs';
import { describe, expect } from 'vitest';
import { fc, it, test } from '@fast-check/vitest';
import { compileRequest } from '../../operators/compile-request.js';
import { collapseDuplicates } from '../../operators/collapse-duplicates.js';
import { deltaRepeatedOutput } from '../../operators/delta-repeated-output.js';
import type { Mode } from '../../src/config/types.js';
import { readRequest, writeSlots } from '../../src/model/index.js';
import { createTerminator } from '../../src/runtime/index.js';
import { createStep, type ProviderRequest, type ToolResult } from '../../src/step.js';
import type { Vault } from '../../src/vault/types.js';
import {
  actionsOf,
  conversation,
  danglingReferences,
  growingSession,
  renderSession,
  shownArtifacts,
  testInvariants,
  withDeps,
  type Conversation,
  type RequestOptions,
  type WireFormat,
} from '../../src/testing/index.js';
import { propertyDeps } from '../support/properties.js';

const { vault, counter } = await propertyDeps();

// Function-calling and text-protocol agents (fenced ```bash blocks, observations in user messages).
const shapes: RequestOptions = { maxTurns: 6, sizes: ['tiny', 'medium'], protocol: 'both' };
const overrides = {
  minArtifactChars: 300,
  maxInlineChars: 700,
  contextMinVaultChars: 150,
  temporalMinChars: 200,
} as const;

describe('the fidelity invariants hold for the request pipeline of every mode that is not an opt-in', () => {
  for (const mode of ['balanced', 'aggressive', 'native', 'terminal', 'suggest', 'off'] as Mode[]) {
    describe(`mode ${mode}`, () => {
      const pipeline = withDeps<ProviderRequest>(async ({ vault: v, counter: c }) => {
        const tt = await createTerminator({
          vault: v,
          ...(c === undefined ? {} : { counter: c }),
          env: {},
          overrides: { ...overrides, mode },
          metrics: false,
        });
        return { operator: tt.requests(), dispose: () => tt.close() };
      });
      testInvariants(test, pipeline, {
        vault,
        counter,
        inputs: growingSession(shapes),
        only: ['prefix-kept', 'actions-kept', 'no-dangling-reference'],
        params: { numRuns: mode === 'balanced' ? 25 : 8 },
      });
    });
  }

  it('generated sessions get bounded views and digests in balanced mode (the properties are not vacuous)', async () => {
    await using tt = await createTerminator({ vault, counter, env: {}, overrides, metrics: false });
    const seen = new Set<string>();
    for (const [k, session] of fc.sample(growingSession(shapes), { numRuns: 15, seed: 7 }).entries()) {
      const outs = await lastValueFrom(
        from(session.map((r, i) => createStep(r, { sessionId: `cover-${k}`, requestId: `r${i}` }))).pipe(
          tt.requests(),
          toArray(),
        ),
      );
      for (const o of outs)
        for (const d of o.decisions) if (d.kind === 'applied') seen.add(`${d.stage}:${d.reason.replace(/\d+/g, 'n')}`);
    }
    expect([...seen].some((r) => r.startsWith('compileRequest:n old output(s) digested'))).toBe(true);
    expect([...seen].some((r) => r.includes('bounded view'))).toBe(true);
  });

  it('text-protocol sessions of every format get their observations digested and their command blocks checked', async () => {
    await using tt = await createTerminator({ vault, counter, env: {}, overrides, metrics: false });
    const formats = new Set<string>();
    let digestedObservations = 0;
    let blocks = 0;
    for (const [k, session] of fc
      .sample(growingSession({ ...shapes, protocol: 'text' }), { numRuns: 20, seed: 11 })
      .entries()) {
      const outs = await lastValueFrom(
        from(session.map((r, i) => createStep(r, { sessionId: `text-${k}`, requestId: `r${i}` }))).pipe(
          tt.requests(),
          toArray(),
        ),
      );
      const last = outs.at(-1)!.value;
      formats.add('messages' in last ? ('system' in last ? 'anthropic' : 'chat') : 'responses');
      blocks += actionsOf(session.at(-1)!).blocks.length;
      expect(actionsOf(session.at(-1)!).calls).toEqual([]);
      for (const o of outs) {
        const items = (o.value['messages'] ?? o.value['input']) as { role?: string; content?: unknown }[];
        digestedObservations += items.filter(
          (m) => m.role === 'user' && JSON.stringify(m.content).includes('[Token Terminator digest'),
        ).length;
      }
    }
    expect([...formats].sort()).toEqual(['anthropic', 'chat', 'responses']);
    expect(blocks).toBeGreaterThan(0);
    expect(digestedObservations).toBeGreaterThan(0);
  });
});

/**
 * A host running the tool stage: every tool output of the conversation goes through
 * deltaRepeatedOutput in call order (terminal outputs repeated in the session become deltas), and
 * the requests carry what the host's transcript keeps.
 */
async function hostSession(
  c: Conversation,
  format: WireFormat,
  sessionId: string,
  toolStage: ReturnType<typeof deltaRepeatedOutput>,
): Promise<ProviderRequest[]> {
  const requests = renderSession(c, format);
  const last = readRequest(requests.at(-1)!);
  const results: ToolResult[] = last.slots
    .filter((s) => s.kind === 'tool_output')
    .map((s) => ({
      callId: s.callId ?? '',
      name: s.toolName ?? 'tool',
      args: s.callArgs ?? {},
      content: typeof s.value === 'string' ? s.value : JSON.stringify(s.value),
    }));
  const reduced = await lastValueFrom(
    from(results.map((r) => createStep(r, { sessionId, cwd: '/work/app' }))).pipe(toolStage, toArray()),
  );
  const byId = new Map(reduced.map((s) => [s.value.callId, s.value.content]));
  return requests.map((r) => {
    const view = readRequest(r);
    return writeSlots(
      r,
      view.slots
        .filter((s) => s.kind === 'tool_output' && byId.get(s.callId ?? '') !== undefined)
        .map((s) => ({ path: s.path, value: byId.get(s.callId!)! })),
    );
  });
}

describe('a session id reused by a new conversation', () => {
  const requestChain = (v: Vault) => (src: Parameters<ReturnType<typeof compileRequest>>[0]) =>
    src.pipe(
      collapseDuplicates({ vault: v, counter, minArtifactChars: 300, maxInlineChars: 700, inlineViewChars: 250 }),
      compileRequest({ vault: v, counter, minVaultChars: 150 }),
    );
  // Terminal-only conversations, so repeated commands exist to become deltas.
  const terminalOnly = conversation({ ...shapes, protocol: 'tools', tools: ['terminal'], minTurns: 2 });
  let run = 0;

  test.prop([terminalOnly, fc.constantFrom<WireFormat>('chat', 'responses', 'anthropic')], { numRuns: 25 })(
    'never yields a delta against an output the new conversation did not show',
    async (first, format) => {
      const sessionId = `reuse-${run++}`;
      const toolStage = deltaRepeatedOutput({ vault, counter, minChars: 200, scope: 'session' });
      // The second conversation runs the same commands with the same outputs under the same session
      // id: the tool stage, which cannot see requests, answers with deltas against the first one's.
      const second: Conversation = {
        ...first,
        turns: first.turns.map((t, i) => (i === 0 ? { ...t, user: `${t.user} (a new task)` } : t)),
      };
      const a = await hostSession(first, format, sessionId, toolStage);
      const b = await hostSession(second, format, sessionId, toolStage);
      const outs = await lastValueFrom(
        from([...a, ...b].map((r, i) => createStep(r, { sessionId, requestId: `r${i}` }))).pipe(
          requestChain(vault),
          toArray(),
        ),
      );
      let shown = new Set<string>();
      outs.forEach((out, i) => {
        if (i === a.length) shown = new Set(); // the new conversation was shown nothing yet
        expect(danglingReferences(out.value, shown), `request ${i}`).toEqual([]);
        for (const id of shownArtifacts(out.value)) shown.add(id);
      });
    },
  );

  it('the property is not vacuous: the second conversation receives deltas the request stage must resolve', async () => {
    let deltas = 0;
    let resolved = 0;
    for (const [k, c] of fc.sample(terminalOnly, { numRuns: 20, seed: 3 }).entries()) {
      const sessionId = `reuse-cover-${k}`;
      const toolStage = deltaRepeatedOutput({ vault, counter, minChars: 200, scope: 'session' });
      await hostSession(c, 'chat', sessionId, toolStage);
      const b = await hostSession(
        { ...c, turns: c.turns.map((t, i) => (i === 0 ? { ...t, user: `${t.user}!` } : t)) },
        'chat',
        sessionId,
        toolStage,
      );
      deltas +=
        b.at(-1)!['messages'] instanceof Array
          ? (b.at(-1)!['messages'] as { content?: unknown }[]).filter((m) =>
              String(m.content).startsWith('[Token Terminator temporal delta'),
            ).length
          : 0;
      const outs = await lastValueFrom(
        from(b.map((r, i) => createStep(r, { sessionId, requestId: `b${i}` }))).pipe(requestChain(vault), toArray()),
      );
      for (const o of outs)
        for (const d of o.decisions)
          if (d.kind === 'applied' && d.reason.includes('delta(s) against an output the request does not show'))
            resolved++;
    }
    expect(deltas).toBeGreaterThan(0);
    expect(resolved).toBeGreaterThan(0);
  });
});
