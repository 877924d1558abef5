import { afterAll, beforeAll, describe, expect } from 'vitest';
import { fc, it, test } from '@fast-check/vitest';
import { TestScheduler } from 'rxjs/testing';
import { compileRequest } from '../../operators/compile.js';
import { collapseDuplicates } from '../../operators/dedupe.js';
import { evidenceText } from '../../src/compile/evidence.js';
import { horizons, segmentSteps, type CompactionPolicy } from '../../src/compile/steps.js';
import { canonicalJson, createTiktokenCounter, serializedChars } from '../../src/measure/index.js';
import { readRequest } from '../../src/model/index.js';
import { parseReceipt, referencedArtifacts } from '../../src/receipts/index.js';
import { createStep, type ProviderRequest } from '../../src/step.js';
import { createVault } from '../../src/vault/index.js';
import type { TokenCounter } from '../../src/measure/types.js';
import type { Vault } from '../../src/vault/types.js';
import {
  TOOL_NAMES,
  checkRecovery,
  checkSmaller,
  deepFreeze,
  firstDifference,
  growingSession,
  providerRequest,
  requestStream,
  roleProblems,
  testInvariants,
  withDeps,
  type InvariantName,
  type RequestOptions,
} from '../../src/testing/index.js';
import { allKeys, allStrings, recover, runAll, type RequestOp } from '../compile/helpers.js';

const contentAt = (r: ProviderRequest, i: number): unknown => (r['messages'] as { content?: unknown }[])[i]!.content;
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
    const before = structuredClone(req);
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
    expect(roleProblems(out!.value, 'chat')).toEqual([]);
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
    expect(roleProblems(out!.value, 'anthropic')).toEqual([]);
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

  // Write-back over text-block lists (the class of the collapseDuplicates inline bug): a receipted
  // old output becomes its receipt, every other output keeps its very own value (same object).
  const blockSession = (format: 'chat' | 'responses' | 'anthropic', outputs: (t: number) => [unknown, unknown]): ProviderRequest => {
    const items: unknown[] = [{ role: 'user', content: 'Fix the bug.' }];
    for (let t = 0; t < 12; t++) {
      const [large, small] = outputs(t);
      if (format === 'chat') {
        items.push({ role: 'assistant', tool_calls: ['a', 'b'].map((k) => ({ id: `c${t}${k}`, type: 'function', function: { name: 'bash', arguments: '{}' } })) });
        items.push({ role: 'tool', tool_call_id: `c${t}a`, content: large }, { role: 'tool', tool_call_id: `c${t}b`, content: small });
      } else if (format === 'responses') {
        items.push(...['a', 'b'].map((k) => ({ type: 'function_call', call_id: `c${t}${k}`, name: 'bash', arguments: '{}' })));
        items.push({ type: 'function_call_output', call_id: `c${t}a`, output: large }, { type: 'function_call_output', call_id: `c${t}b`, output: small });
      } else {
        items.push({ role: 'assistant', content: ['a', 'b'].map((k) => ({ type: 'tool_use', id: `c${t}${k}`, name: 'bash', input: {} })) });
        items.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: `c${t}a`, content: large }, { type: 'tool_result', tool_use_id: `c${t}b`, content: small }] });
      }
    }
    return deepFreeze(format === 'chat' ? { model: 'gpt-4o', messages: items } : format === 'responses' ? { model: 'gpt-5', input: items } : { model: 'claude', max_tokens: 100, system: 's', messages: items });
  };
  /** Every tool output of a request by call id, with the holder it sits in. */
  const outputsById = (request: ProviderRequest): Map<string, unknown> => {
    const view = readRequest(request);
    return new Map(view.slots.filter((sl) => sl.kind === 'tool_output').map((sl) => [sl.callId!, sl.value]));
  };

  for (const format of ['chat', 'responses', 'anthropic'] as const) {
    it(`receipts old text-block outputs and leaves every other output value the very same object (${format})`, async () => {
      const part = format === 'responses' ? 'input_text' : 'text';
      const req = blockSession(format, (t) => [[{ type: part, text: big(t) }, { type: part, text: `tail ${t}` }], [{ type: part, text: `ok ${t}` }]]);
      const [out] = await runAll(compileRequest({ vault, minVaultChars: 500, collapseAfterTurns: 0, inlineRecentTurns: 3, blockTurns: 2 }), [[req, { sessionId: `wb-${format}` }]]);
      const before = outputsById(req);
      const after = outputsById(out!.value);
      let receipted = 0;
      for (const [id, value] of after) {
        const original = before.get(id);
        const receipt = typeof value === 'string' ? parseReceipt(value) : undefined;
        if (receipt === undefined) {
          expect(value, id).toBe(original);
          continue;
        }
        receipted++;
        expect(id.endsWith('a'), id).toBe(true);
        expect(await recover(vault, receipt.artifactId)).toBe(evidenceText(original));
      }
      expect(after.size).toBe(before.size);
      expect(receipted).toBeGreaterThan(0);
      expect(roleProblems(out!.value, format)).toEqual([]);
      // Items without a receipted output are the caller's own objects.
      const list = (r: ProviderRequest): unknown[] => (r['messages'] ?? r['input']) as unknown[];
      list(out!.value).forEach((item, i) => {
        if (!allStrings(item).some((x) => parseReceipt(x) !== undefined)) expect(item).toBe(list(req)[i]);
      });
    });
  }

  it('leaves an upstream bounded view of a text-block list alone, as a string or handed back inside a text block', async () => {
    const blocks = (t: number) => [{ type: 'text', text: Array.from({ length: 400 }, (_, i) => `turn ${t} row ${i} "quoted"`).join('\n') }];
    const single = deepFreeze({ messages: [{ role: 'user', content: 'go' }, { role: 'assistant', content: [{ type: 'tool_use', id: 'v', name: 'bash', input: {} }] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'v', content: blocks(0) }] }] });
    const [viewed] = await runAll(collapseDuplicates({ vault, minArtifactChars: 1000, maxInlineChars: 2000, inlineViewChars: 600 }), [[single, { sessionId: 'views', requestId: 'v' }]]);
    const view = (contentAt(viewed!.value, 2) as { content: unknown }[])[0]!.content as string;
    expect(parseReceipt(view.split('\n').at(-1)!)).toBeDefined();
    expect(view.startsWith('turn 0 row 0 "quoted"\n')).toBe(true); // the blocks' text, not their JSON
    const req = blockSession('anthropic', (t) => [t % 2 === 0 ? view : [{ type: 'text', text: view }], [{ type: 'text', text: `ok ${t}` }]]);
    const [out] = await runAll(compileRequest({ vault, minVaultChars: 500, collapseAfterTurns: 0, inlineRecentTurns: 3, blockTurns: 2 }), [[req, { sessionId: 'views' }]]);
    expect(out!.value).toBe(req);
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

// Created at load time: the kit registers its properties with the vault they run against.
const propertyVault = await createVault({ path: ':memory:' });

describe('request chain — properties (all three formats)', () => {
  const vault = propertyVault;
  const counter = createTiktokenCounter('o200k_base');
  afterAll(async () => {
    counter.dispose?.();
    await vault.close();
  });
  let run = 0;
  const policy: CompactionPolicy = { blockSteps: 2, inlineRecentSteps: 2, collapseAfterSteps: 3 };
  // The stages get the exact counter the properties check tokens with (the acceptance gate's token
  // half): without it a 150-char output may become a slightly shorter receipt of more tokens.
  const build = (v: Vault, leaseBlockTurns: number, c: TokenCounter | undefined = counter): RequestOp => (src) =>
    src.pipe(
      collapseDuplicates({ vault: v, ...(c === undefined ? {} : { counter: c }), minArtifactChars: 300, maxInlineChars: 700, inlineViewChars: 250, leaseBlockTurns }),
      compileRequest({ vault: v, ...(c === undefined ? {} : { counter: c }), minVaultChars: 150, blockTurns: policy.blockSteps, inlineRecentTurns: policy.inlineRecentSteps, collapseAfterTurns: policy.collapseAfterSteps }),
    );
  const chain = (leaseBlockTurns: number): RequestOp => build(vault, leaseBlockTurns);
  // Up to 6 turns (≈ 18 steps) so collapses and sealed blocks happen; outputs up to 6,000 chars.
  // Anthropic tool results in both shapes (the kit's default 'mixed': strings and text-block lists).
  const shapes: RequestOptions = { maxTurns: 6, sizes: ['tiny', 'medium'], tools: [...TOOL_NAMES, 'weird tool]\n'] };
  const stepCount = (request: ProviderRequest): number => segmentSteps(readRequest(request).itemInfo).starts.length;
  const listOf = (r: ProviderRequest): unknown[] => (r['messages'] ?? r['input']) as unknown[];
  const leaseBlock = (s: number): number => Math.floor(Math.max(0, s - 1) / policy.blockSteps);
  const sameHorizons = (a: number, b: number): boolean => canonicalJson(horizons(a, policy)) === canonicalJson(horizons(b, policy));

  describe('kit invariants', () => {
    const INVARIANTS: InvariantName[] = ['unchanged-or-smaller', 'never-mutates', 'recovers-exactly', 'fails-open', 'releases-on-unsubscribe', 'valid-roles'];
    testInvariants(test, withDeps<ProviderRequest>(({ vault: v, counter: c }) => build(v, 0, c)), { vault, counter, inputs: requestStream({ ...shapes, maxLength: 2 }), only: INVARIANTS, params: { numRuns: 20 } });
    // Renderings move only at block boundaries: where the lease block or the horizons of the
    // caller's request change (computed from the input, not from what the chain reports).
    const isBoundary = (prev: { original: ProviderRequest }, next: { original: ProviderRequest }): boolean => {
      const [sa, sb] = [stepCount(prev.original), stepCount(next.original)];
      return leaseBlock(sa) !== leaseBlock(sb) || !sameHorizons(sa, sb);
    };
    testInvariants(test, withDeps<ProviderRequest>(({ vault: v, counter: c }) => build(v, policy.blockSteps, c)), {
      vault,
      inputs: growingSession(shapes),
      only: ['cache-stable'],
      isBoundary,
      params: { numRuns: 20 },
    });
  });

  it('generated sessions collapse turns and receipt outputs (the properties are not vacuous)', async () => {
    const reasons = new Set<string>();
    for (const [k, session] of fc.sample(growingSession(shapes), { numRuns: 15, seed: 42 }).entries()) {
      const outs = await runAll(chain(policy.blockSteps), session.map((r, i) => [r, { sessionId: `coverage-${k}`, requestId: `r${i}` }] as const));
      for (const out of outs) for (const d of out.decisions) if (d.kind === 'applied') reasons.add(d.stage);
    }
    expect([...reasons].sort()).toEqual(['collapseDuplicates', 'compileRequest']);
  });

  test.prop([providerRequest(shapes)], { numRuns: 30 })(
    'a retry compiles to the same output; the chain adds no keys, stays smaller, and its receipts recover tool outputs, its notes turns',
    async (request) => {
      const req = deepFreeze(structuredClone(request));
      const before = structuredClone(req);
      const sessionId = `chain-${run++}`;
      const [a, b] = await runAll(chain(0), [[req, { sessionId, requestId: 'r' }], [req, { sessionId, requestId: 'r' }]]);
      expect(firstDifference(before, req)).toBeUndefined();
      expect(canonicalJson(b!.value)).toBe(canonicalJson(a!.value));
      const out = a!.value;
      checkSmaller(req, out, 'request', counter);
      await checkRecovery(vault, [req], a!, 'request');
      expect(roleProblems(out)).toEqual(roleProblems(req));
      expect([...allKeys(out)].filter((k) => !allKeys(req).has(k) && k !== 'role' && k !== 'content')).toEqual([]);
      // Stronger than the kit's provenance rule: receipts name whole tool outputs, notes name turn lists.
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

  test.prop([growingSession(shapes)], { numRuns: 20 })(
    'per-request leases: between compaction boundaries only an item whose lease just expired may change',
    async (session) => {
      const sessionId = `lease-${run++}`;
      const requests = session.map((r) => deepFreeze(structuredClone(r)));
      const outs = await runAll(chain(0), requests.map((r, i) => [r, { sessionId, requestId: `r${i}` }] as const));
      for (let i = 0; i + 1 < requests.length; i++) {
        const rawA = listOf(requests[i]!);
        if (canonicalJson(listOf(requests[i + 1]!).slice(0, rawA.length)) !== canonicalJson(rawA)) continue;
        if (!sameHorizons(stepCount(requests[i]!), stepCount(requests[i + 1]!))) continue;
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
