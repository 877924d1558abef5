import { afterAll, beforeAll, describe, expect } from 'vitest';
import { fc, it, test } from '@fast-check/vitest';
import { TestScheduler } from 'rxjs/testing';
import { compileRequest } from '../../operators/compile.js';
import { collapseDuplicates } from '../../operators/dedupe.js';
import { evidenceText } from '../../src/compile/evidence.js';
import { horizons, segmentSteps, type CompactionPolicy } from '../../src/compile/steps.js';
import { canonicalJson, serializedChars } from '../../src/measure/index.js';
import { readRequest } from '../../src/model/index.js';
import { parseReceipt, referencedArtifacts } from '../../src/receipts/index.js';
import { createStep, type ProviderRequest } from '../../src/step.js';
import { createVault } from '../../src/vault/index.js';
import type { Vault } from '../../src/vault/types.js';
import { FORMATS, buildRequest, conversationArb, deepFreeze, roleProblems, snapshot, type Format, type GenConversation } from '../model/arbitraries.js';
import { allKeys, allStrings, recover, runAll, type RequestOp } from '../compile/helpers.js';

const big = (t: number): string => Array.from({ length: 60 }, (_, i) => `step ${t} evidence line ${i}`).join('\n');

/** An agent-loop session: system, demo, task, then assistant/tool rounds. */
function agentSession(rounds: number, image = false): ProviderRequest {
  const messages: unknown[] = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'demonstration of the interface' },
    { role: 'user', content: image ? [{ type: 'text', text: 'Fix the bug.' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] : 'Fix the bug.' },
  ];
  for (let t = 0; t < rounds; t++) {
    messages.push({ role: 'assistant', content: `thinking ${t}`, tool_calls: [{ id: `c${t}`, type: 'function', function: { name: 'bash', arguments: `{"command":"step ${t}"}` } }] });
    messages.push({ role: 'tool', tool_call_id: `c${t}`, content: big(t) });
  }
  return deepFreeze({ model: 'gpt-4o', messages });
}

describe('compileRequest — unit', () => {
  let vault: Vault;
  beforeAll(async () => {
    vault = await createVault({ path: ':memory:' });
  });
  afterAll(async () => vault.close());
  const op = (): RequestOp => compileRequest({ vault, minVaultChars: 500, collapseAfterTurns: 6, inlineRecentTurns: 3, blockTurns: 2 });

  it('collapses old turns losslessly, receipts old outputs, keeps recent turns verbatim', async () => {
    const req = agentSession(12);
    const before = snapshot(req);
    const [out] = await runAll(op(), [[req, { sessionId: 'u1' }]]);
    expect(req).toEqual(before);
    const inMsgs = req['messages'] as Record<string, unknown>[];
    const outMsgs = out!.value['messages'] as Record<string, unknown>[];
    // 13 steps (demo; task + round 0; rounds 1–11): steps 0–5 collapse, 6–9 are sealed, 10–12 verbatim.
    expect(outMsgs[0]).toBe(inMsgs[0]);
    const note = String(outMsgs[1]!['content']);
    expect(note.split('\n')[0]).toMatch(/^\[Token Terminator collapsed steps 0-1 .*artifact=a_[0-9a-f]{32}/);
    expect(note.endsWith('\n\nFix the bug.')).toBe(true); // the task stays visible
    const recovered = (await Promise.all(referencedArtifacts(note).map((id) => recover(vault, id)))).flatMap((t) => JSON.parse(t) as unknown[]);
    const cut = inMsgs.length - outMsgs.length + 2;
    expect(canonicalJson(recovered)).toBe(canonicalJson(inMsgs.slice(1, cut)));
    outMsgs.slice(-6).forEach((m, i) => expect(m).toBe(inMsgs[inMsgs.length - 6 + i]));
    const receipts = outMsgs.filter((m) => m['role'] === 'tool' && parseReceipt(String(m['content'])) !== undefined);
    expect(receipts).toHaveLength(4);
    for (const m of receipts) expect(await recover(vault, parseReceipt(String(m['content']))!.artifactId)).toBe(inMsgs.find((x) => x['tool_call_id'] === m['tool_call_id'])!['content']);
    expect(roleProblems('chat', out!.value)).toEqual([]);
    expect([...allKeys(out!.value)].filter((k) => !allKeys(req).has(k))).toEqual([]);
    expect(serializedChars(out!.value)).toBeLessThan(serializedChars(req));
    expect(out!.decisions.at(-1)).toMatchObject({ stage: 'compileRequest', kind: 'applied' });
  });

  it('keeps multimodal parts of the user message the note rides in', async () => {
    const [out] = await runAll(op(), [[agentSession(12, true), { sessionId: 'u2' }]]);
    const content = (out!.value['messages'] as Record<string, unknown>[])[1]!['content'] as Record<string, unknown>[];
    expect(content[0]!['text']).toMatch(/^\[Token Terminator collapsed steps/);
    expect(content.slice(1)).toEqual([{ type: 'text', text: 'Fix the bug.' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }]);
  });

  it('keeps Anthropic alternation and tool_use/tool_result pairing after a collapse', async () => {
    const messages: unknown[] = [{ role: 'user', content: 'task' }];
    for (let t = 0; t < 12; t++) {
      messages.push({ role: 'assistant', content: [{ type: 'text', text: `t${t}` }, { type: 'tool_use', id: `u${t}`, name: 'bash', input: {} }] });
      messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: `u${t}`, content: big(t) }] });
    }
    const req = deepFreeze({ system: 'sys', max_tokens: 100, messages });
    const [out] = await runAll(op(), [[req, { sessionId: 'u3' }]]);
    expect(out!.value).not.toBe(req);
    expect(roleProblems('anthropic', out!.value)).toEqual([]);
  });

  it('compiles a retry to the same output and leaves short conversations alone', async () => {
    const req = agentSession(12);
    const small = agentSession(2);
    const [a, b, c] = await runAll(op(), [[req, { sessionId: 'u4', requestId: 'x' }], [req, { sessionId: 'u4', requestId: 'x' }], [small, { sessionId: 'u4' }]]);
    expect(canonicalJson(b!.value)).toBe(canonicalJson(a!.value));
    expect(c!.value).toBe(small);
  });

  it('leaves outputs inline when the vault fails, and validates options when built', async () => {
    const broken = new Proxy(vault, { get: (t, k) => (k === 'put' ? async () => { throw new Error('disk'); } : Reflect.get(t, k, t)) });
    const req = agentSession(12);
    const [out] = await runAll(compileRequest({ vault: broken, minVaultChars: 500, collapseAfterTurns: 0, inlineRecentTurns: 3, blockTurns: 2 }), [[req, { sessionId: 'u5' }]]);
    expect(out!.value).toBe(req);
    expect(() => compileRequest({ vault, blockTurns: 0 })).toThrow(/compileRequest: blockTurns/);
    expect(() => compileRequest({ vault, minVaultChars: 10 })).toThrow(/compileRequest/);
  });

  it('passes short requests through in order (marbles)', () => {
    const scheduler = new TestScheduler((x, y) => expect(x).toEqual(y));
    scheduler.run(({ cold, expectObservable }) => {
      const a = createStep<ProviderRequest>(agentSession(1), { sessionId: 'm' });
      const b = createStep<ProviderRequest>({ prompt: 'x' }, { sessionId: 'm' });
      expectObservable(cold('ab-a|', { a, b }).pipe(op())).toBe('ab-a|', { a, b });
    });
  });
});

describe('request chain — properties (all three formats)', () => {
  let vault: Vault;
  beforeAll(async () => {
    vault = await createVault({ path: ':memory:' });
  });
  afterAll(async () => vault.close());
  let run = 0;
  const policy: CompactionPolicy = { blockSteps: 2, inlineRecentSteps: 2, collapseAfterSteps: 3 };
  const chain = (leaseBlockTurns: number): RequestOp => (src) =>
    src.pipe(
      collapseDuplicates({ vault, minArtifactChars: 300, maxInlineChars: 700, inlineViewChars: 250, leaseBlockTurns }),
      compileRequest({ vault, minVaultChars: 150, blockTurns: policy.blockSteps, inlineRecentTurns: policy.inlineRecentSteps, collapseAfterTurns: policy.collapseAfterSteps }),
    );

  test.prop([fc.constantFrom(...FORMATS), conversationArb(9, 500)], { numRuns: 30 })(
    'unchanged or strictly smaller, caller untouched, receipts recover, roles valid, retries identical',
    async (format, convo) => {
      const req = deepFreeze(buildRequest(format, convo));
      const before = snapshot(req);
      const sessionId = `chain-${run++}`;
      const [a, b] = await runAll(chain(0), [[req, { sessionId, requestId: 'r' }], [req, { sessionId, requestId: 'r' }]]);
      expect(req).toEqual(before);
      expect(canonicalJson(b!.value)).toBe(canonicalJson(a!.value));
      const out = a!.value;
      if (out !== req) expect(serializedChars(out)).toBeLessThan(serializedChars(req));
      expect(roleProblems(format, out)).toEqual(roleProblems(format, req));
      expect([...allKeys(out)].filter((k) => !allKeys(req).has(k) && k !== 'role' && k !== 'content')).toEqual([]);
      const originals = new Set(readRequest(req).slots.filter((s) => s.kind === 'tool_output').map((s) => evidenceText(s.value)));
      for (const s of allStrings(out)) {
        for (const line of s.split('\n')) {
          const receipt = parseReceipt(line);
          if (receipt !== undefined) expect(originals.has(await recover(vault, receipt.artifactId))).toBe(true);
          else for (const id of referencedArtifacts(line)) expect(Array.isArray(JSON.parse(await recover(vault, id)))).toBe(true);
        }
      }
    },
  );

  const stepCount = (format: Format, convo: GenConversation, n: number): number => segmentSteps(readRequest(buildRequest(format, convo, n)).itemInfo).starts.length;
  const listOf = (r: ProviderRequest): unknown[] => (r['messages'] ?? r['input']) as unknown[];

  test.prop([fc.constantFrom(...FORMATS), conversationArb(12, 500)], { numRuns: 20 })(
    'cache stability: compiled N+1 starts with compiled N except at block boundaries',
    async (format, convo) => {
      const sessionId = `cache-${run++}`;
      const n = convo.steps.length;
      const requests = Array.from({ length: n }, (_, i) => deepFreeze(buildRequest(format, convo, i + 1)));
      const outs = await runAll(chain(policy.blockSteps), requests.map((r, i) => [r, { sessionId, requestId: `r${i}` }] as const));
      for (let i = 0; i + 1 < n; i++) {
        const rawA = listOf(requests[i]!);
        const rawB = listOf(requests[i + 1]!);
        // Only append-only growth can keep a prefix (the Anthropic generator merges text into the last user message).
        if (canonicalJson(rawB.slice(0, rawA.length)) !== canonicalJson(rawA)) continue;
        const sa = stepCount(format, convo, i + 1);
        const sb = stepCount(format, convo, i + 2);
        const leaseBlock = (s: number): number => Math.floor(Math.max(0, s - 1) / policy.blockSteps);
        const boundary = leaseBlock(sa) !== leaseBlock(sb) || canonicalJson(horizons(sa, policy)) !== canonicalJson(horizons(sb, policy));
        if (boundary) continue;
        const a = canonicalJson(listOf(outs[i]!.value));
        const b = canonicalJson(listOf(outs[i + 1]!.value));
        expect(b.startsWith(a.slice(0, -1)), `request ${i + 1} → ${i + 2}`).toBe(true);
      }
    },
  );

  test.prop([fc.constantFrom(...FORMATS), conversationArb(12, 500)], { numRuns: 20 })(
    'per-request leases: between compaction boundaries only an item whose lease just expired may change',
    async (format, convo) => {
      const sessionId = `lease-${run++}`;
      const n = convo.steps.length;
      const requests = Array.from({ length: n }, (_, i) => deepFreeze(buildRequest(format, convo, i + 1)));
      const outs = await runAll(chain(0), requests.map((r, i) => [r, { sessionId, requestId: `r${i}` }] as const));
      for (let i = 0; i + 1 < n; i++) {
        const rawA = listOf(requests[i]!);
        if (canonicalJson(listOf(requests[i + 1]!).slice(0, rawA.length)) !== canonicalJson(rawA)) continue;
        const [sa, sb] = [stepCount(format, convo, i + 1), stepCount(format, convo, i + 2)];
        if (canonicalJson(horizons(sa, policy)) !== canonicalJson(horizons(sb, policy))) continue;
        const a = listOf(outs[i]!.value);
        const b = listOf(outs[i + 1]!.value);
        const view = readRequest(outs[i]!.value);
        a.forEach((item, j) => {
          if (canonicalJson(item) === canonicalJson(b[j])) return;
          // The only allowed change: an output that was inline (or a bounded view) in N becomes a receipt.
          const inlineOutput = view.slots.some((sl) => sl.item === j && sl.kind === 'tool_output' && (evidenceText(sl.value)?.length ?? 0) >= 300);
          expect(inlineOutput, `item ${j} of request ${i + 1}`).toBe(true);
        });
      }
    },
  );
});
