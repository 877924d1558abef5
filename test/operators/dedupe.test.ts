import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { fc, it, test } from '@fast-check/vitest';
import { TestScheduler } from 'rxjs/testing';
import { collapseDuplicates } from '../../operators/dedupe.js';
import { case3Request, case4Request } from '../../src/compile/structural.js';
import { evidenceText } from '../../src/compile/evidence.js';
import { createTiktokenCounter } from '../../src/measure/index.js';
import type { TokenCounter } from '../../src/measure/types.js';
import { readRequest } from '../../src/model/index.js';
import { parseReceipt } from '../../src/receipts/index.js';
import { createStep, type ProviderRequest } from '../../src/step.js';
import { createVault } from '../../src/vault/index.js';
import type { Vault } from '../../src/vault/types.js';
import {
  TOOL_NAMES,
  checkRecovery,
  checkSmaller,
  deepFreeze,
  firstDifference,
  providerRequest,
  requestStream,
  testInvariants,
  withDeps,
  type InvariantName,
  type RequestOptions,
} from '../../src/testing/index.js';
import { allStrings, recover, runAll } from '../compile/helpers.js';

const ART = 'diagnostic evidence line\n'.repeat(200); // 5000 chars
const contentAt = (r: ProviderRequest, i: number): unknown => (r['messages'] as { content?: unknown }[])[i]!.content;

describe('collapseDuplicates — unit', () => {
  let vault: Vault;
  beforeAll(async () => {
    vault = await createVault({ path: ':memory:' });
  });
  afterAll(async () => vault.close());
  const op = (extra: object = {}) => collapseDuplicates({ vault, minArtifactChars: 1000, ...extra });

  it('keeps a new large output inline once, reuses it for a retry, then receipts it', async () => {
    const req = deepFreeze(case3Request(ART));
    const before = structuredClone(req);
    const [first, retry, next] = await runAll(op(), [
      [req, { sessionId: 'lease', requestId: 'r1' }],
      [req, { sessionId: 'lease', requestId: 'r1' }],
      [req, { sessionId: 'lease', requestId: 'r2' }],
    ]);
    expect(first!.value).toBe(req);
    expect(retry!.value).toBe(req);
    const receipt = parseReceipt(String(contentAt(next!.value, 3)));
    expect(receipt).toMatchObject({ tool: 'terminal', chars: ART.length });
    expect(await recover(vault, receipt!.artifactId)).toBe(ART);
    expect(req).toEqual(before);
    const [otherSession] = await runAll(op(), [[req, { sessionId: 'lease-2', requestId: 'r9' }]]);
    expect(otherSession!.value).toBe(req);
  });

  it('keeps only the newest copy of a same-request duplicate inline', async () => {
    const req = deepFreeze(case4Request(ART));
    const [out] = await runAll(op(), [[req, { sessionId: 'dup', requestId: 'd1' }]]);
    expect(parseReceipt(String(contentAt(out!.value, 2)))).toMatchObject({ tool: 'tool' });
    expect(contentAt(out!.value, 4)).toBe(ART);
    expect(out!.decisions.at(-1)).toMatchObject({ stage: 'collapseDuplicates', kind: 'applied', reason: '1 duplicate(s) collapsed' });
  });

  it('receipts Responses outputs and Anthropic tool_result blocks in place', async () => {
    const responses = deepFreeze({ input: [{ role: 'user', content: 'go' }, { type: 'function_call', call_id: 'c1', name: 'read_file', arguments: '{}' }, { type: 'function_call_output', call_id: 'c1', output: ART }] });
    const anthropic = deepFreeze({ system: 's', messages: [{ role: 'user', content: 'go' }, { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'bash', input: {} }] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: ART }] }] });
    const outs = await runAll(op({ inlineLeases: 0 }), [
      [responses, { sessionId: 'fmt', requestId: '1' }],
      [anthropic, { sessionId: 'fmt', requestId: '2' }],
    ]);
    const item = (outs[0]!.value['input'] as Record<string, unknown>[])[2]!;
    expect(item).toMatchObject({ type: 'function_call_output', call_id: 'c1' });
    expect(parseReceipt(String(item['output']))).toMatchObject({ tool: 'read_file' });
    const block = ((outs[1]!.value['messages'] as { content: Record<string, unknown>[] }[])[2]!.content)[0]!;
    expect(block).toMatchObject({ type: 'tool_result', tool_use_id: 't1' });
    expect(parseReceipt(String(block['content']))).toMatchObject({ tool: 'bash' });
  });

  it('shows an oversized inline exposure as a bounded view plus the receipt', async () => {
    const huge = Array.from({ length: 3000 }, (_, i) => `row ${i} payload`).join('\n');
    const [out] = await runAll(op({ maxInlineChars: 10_000, inlineViewChars: 2000 }), [[case3Request(huge), { sessionId: 'view', requestId: 'v1' }]]);
    const text = String(contentAt(out!.value, 3));
    expect(text.startsWith('row 0 payload\n')).toBe(true);
    const last = text.split('\n').at(-1)!;
    expect(await recover(vault, parseReceipt(last)!.artifactId)).toBe(huge);
    expect(text.length).toBeLessThan(2500);
  });

  it('records the exposure actually delivered when its own gate keeps the input', async () => {
    const liar: TokenCounter = { name: 'liar', exact: true, count: (t) => (t.includes('Token Terminator artifact') ? 10_000_000 : 1) };
    const req = case4Request(ART);
    const [out] = await runAll(op({ counter: liar }), [[req, { sessionId: 'rej', requestId: 'x1' }]]);
    expect(out!.value).toBe(req);
    expect(out!.decisions.at(-1)).toMatchObject({ kind: 'skipped', reason: 'not smaller in tokens' });
    const id = parseReceipt(String(contentAt((await runAll(op(), [[req, { sessionId: 'probe', requestId: 'p' }]]))[0]!.value, 2)))!.artifactId;
    // The rejected request delivered the artifact inline: its own id still may, a new one may not.
    expect(await vault.exposureAvailable('rej', id, 'x1', 1)).toBe(true);
    expect(await vault.exposureAvailable('rej', id, 'x2', 1)).toBe(false);
  });

  it('pins the artifacts its receipts name', async () => {
    const pinned: string[] = [];
    const spy = new Proxy(vault, { get: (t, k) => (k === 'pin' ? async (ids: readonly string[]) => { pinned.push(...ids); return t.pin(ids); } : Reflect.get(t, k, t)) });
    const [, out] = await runAll(collapseDuplicates({ vault: spy, minArtifactChars: 1000 }), [
      [case3Request(ART), { sessionId: 'pin', requestId: 'a' }],
      [case3Request(ART), { sessionId: 'pin', requestId: 'b' }],
    ]);
    expect(pinned).toEqual([parseReceipt(String(contentAt(out!.value, 3)))!.artifactId]);
  });

  it('leaves an output inline when the vault cannot store it, and fails open on a lease error', async () => {
    const broken = new Proxy(vault, { get: (t, k) => (k === 'put' ? async () => { throw new Error('disk'); } : Reflect.get(t, k, t)) });
    const req = case3Request('other evidence\n'.repeat(200));
    const [out] = await runAll(collapseDuplicates({ vault: broken, minArtifactChars: 1000, inlineLeases: 0 }), [[req, { sessionId: 'broken', requestId: '1' }]]);
    expect(out!.value).toBe(req);
    const noLease = new Proxy(vault, { get: (t, k) => (k === 'exposureAvailable' ? async () => { throw new Error('db'); } : Reflect.get(t, k, t)) });
    const [failed] = await runAll(collapseDuplicates({ vault: noLease, minArtifactChars: 1000 }), [[case3Request('yet other\n'.repeat(300)), { sessionId: 'broken', requestId: '2' }]]);
    expect(failed!.decisions.at(-1)).toMatchObject({ kind: 'failed_open' });
  });

  // Regression (found by the testing kit's recovers-exactly over the dedupe→compile chain): an
  // inline exposure used to be written back as its evidence text, so a text-block list became a
  // JSON string whenever another slot of the same request was receipted.
  it('keeps an inline text-block tool result as the very same list when another slot of the request is receipted', async () => {
    const blocks = [{ type: 'text', text: 'another output line\n'.repeat(80) }];
    const anthropic = deepFreeze({
      system: 's',
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: ['t1', 't2', 't3'].map((id) => ({ type: 'tool_use', id, name: 'bash', input: {} })) },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: ART }, { type: 'tool_result', tool_use_id: 't2', content: ART }, { type: 'tool_result', tool_use_id: 't3', content: blocks }] },
      ],
    });
    const parts = [{ type: 'text', text: 'chat part one\n'.repeat(60) }, { type: 'text', text: 'chat part two\n'.repeat(60) }];
    const chat = deepFreeze({
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', tool_calls: ['c1', 'c2', 'c3'].map((id) => ({ id, type: 'function', function: { name: 'bash', arguments: '{}' } })) },
        { role: 'tool', tool_call_id: 'c1', content: ART },
        { role: 'tool', tool_call_id: 'c2', content: ART },
        { role: 'tool', tool_call_id: 'c3', content: parts },
      ],
    });
    // Separate sessions: the same ART in one session would have spent its lease on the first request.
    const [a, c] = await runAll(op(), [
      [anthropic, { sessionId: 'blocks', requestId: 'b1' }],
      [chat, { sessionId: 'blocks-chat', requestId: 'b2' }],
    ]);
    for (const out of [a!, c!]) expect(out.decisions.at(-1)).toMatchObject({ kind: 'applied', reason: '1 duplicate(s) collapsed' });
    const results = (a!.value['messages'] as { content: { content: unknown }[] }[])[2]!.content;
    expect(parseReceipt(String(results[0]!.content))).toBeDefined();
    expect(results[1]!.content).toBe(ART);
    expect(results[2]!.content).toBe(blocks);
    expect(parseReceipt(String(contentAt(c!.value, 2)))).toBeDefined();
    expect(contentAt(c!.value, 3)).toBe(ART);
    expect(contentAt(c!.value, 4)).toBe(parts);
    // Untouched items are shared with the caller, not copies.
    expect((c!.value['messages'] as unknown[])[4]).toBe((chat['messages'] as unknown[])[4]);
  });

  it('shows a bounded view of a text-block list as its text (not its JSON); the receipt recovers the exact list', async () => {
    const blocks = [{ type: 'text', text: Array.from({ length: 1500 }, (_, i) => `row ${i} "quoted" payload`).join('\n') }, { type: 'text', text: 'second block' }];
    const req = deepFreeze({ system: 's', messages: [{ role: 'user', content: 'go' }, { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'bash', input: {} }] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: blocks }] }] });
    const [out] = await runAll(op({ maxInlineChars: 10_000, inlineViewChars: 2000 }), [[req, { sessionId: 'block-view', requestId: 'v1' }]]);
    const text = String(((out!.value['messages'] as { content: { content: unknown }[] }[])[2]!.content)[0]!.content);
    expect(text.startsWith('row 0 "quoted" payload\nrow 1 "quoted" payload\n')).toBe(true);
    expect(text).not.toContain('\\n');
    expect(text).not.toContain('\\"');
    expect(text.split('\n').at(-3)).toBe('second block');
    expect(await recover(vault, parseReceipt(text.split('\n').at(-1)!)!.artifactId)).toBe(evidenceText(blocks));
    expect(text.length).toBeLessThan(2500);
  });

  it('validates options when built', () => {
    expect(() => collapseDuplicates({ vault, inlineLeases: 101 })).toThrow(/collapseDuplicates: inlineLeases/);
    expect(() => collapseDuplicates({ vault, minArtifactChars: 0 })).toThrow(/collapseDuplicates/);
  });

  it('passes requests without large outputs through in order (marbles)', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ cold, expectObservable }) => {
      const a = createStep<ProviderRequest>({ messages: [{ role: 'user', content: 'hi' }] }, { sessionId: 'm' });
      const b = createStep<ProviderRequest>({ prompt: 'legacy' }, { sessionId: 'm' });
      expectObservable(cold('a-b-a|', { a, b }).pipe(op())).toBe('a-b-a|', { a, b });
    });
  });
});

// Created at load time: the kit registers its properties with the vault they run against.
const propertyVault = await createVault({ path: ':memory:' });

describe('collapseDuplicates — properties', () => {
  const vault = propertyVault;
  const counter = createTiktokenCounter('o200k_base');
  afterAll(async () => {
    counter.dispose?.();
    await vault.close();
  });
  // Low thresholds so most generated outputs are large enough to receipt or show as a bounded view;
  // a hostile tool name checks the receipt label.
  const shapes: RequestOptions = { maxTurns: 5, sizes: ['tiny', 'medium'], tools: [...TOOL_NAMES, 'weird tool]\n'] };
  const lowThresholds = { minArtifactChars: 200, maxInlineChars: 400, inlineViewChars: 200 };
  const INVARIANTS: InvariantName[] = ['unchanged-or-smaller', 'never-mutates', 'recovers-exactly', 'fails-open', 'releases-on-unsubscribe', 'valid-roles'];

  describe('kit invariants (no inline lease, successive requests of one session)', () => {
    const op = withDeps<ProviderRequest>(({ vault: v, counter: c }) => collapseDuplicates({ vault: v, ...(c === undefined ? {} : { counter: c }), ...lowThresholds, inlineLeases: 0 }));
    testInvariants(test, op, { vault, counter, inputs: requestStream({ ...shapes, maxLength: 3 }), only: INVARIANTS, params: { numRuns: 20 } });
  });

  it('generated requests trigger lease receipts and duplicate collapses (the properties are not vacuous)', async () => {
    const reasons = new Set<string>();
    for (const [k, request] of fc.sample(providerRequest(shapes), { numRuns: 30, seed: 42 }).entries()) {
      const outs = await runAll(collapseDuplicates({ vault, ...lowThresholds, inlineLeases: k % 3 }), [
        [request, { sessionId: `coverage-${k}`, requestId: 'a' }],
        [request, { sessionId: `coverage-${k}`, requestId: 'b' }],
      ]);
      for (const out of outs) for (const d of out.decisions) if (d.kind === 'applied') reasons.add(d.reason.replace(/^\d+/u, 'N'));
    }
    expect([...reasons].sort()).toEqual(['N duplicate(s) collapsed', 'lease receipts']);
  });

  let run = 0;
  test.prop([providerRequest(shapes), fc.integer({ min: 0, max: 2 })], { numRuns: 60 })(
    'a retry gives the same output; every output is unchanged or smaller, leaves the caller untouched and its receipts recover tool outputs exactly',
    async (request, leases) => {
      const req = deepFreeze(structuredClone(request));
      const before = structuredClone(req);
      const sessionId = `prop-${run++}`;
      const op = collapseDuplicates({ vault, counter, ...lowThresholds, inlineLeases: leases });
      const [a, b, c] = await runAll(op, [
        [req, { sessionId, requestId: 'r1' }],
        [req, { sessionId, requestId: 'r1' }],
        [req, { sessionId, requestId: 'r2' }],
      ]);
      expect(firstDifference(before, req)).toBeUndefined();
      expect(b!.value).toEqual(a!.value);
      const originals = new Set(readRequest(req).slots.filter((s) => s.kind === 'tool_output').map((s) => evidenceText(s.value)));
      for (const [i, out] of [a!, c!].entries()) {
        checkSmaller(req, out.value, `request ${i}`, counter);
        await checkRecovery(vault, [req], out, `request ${i}`);
        // Stronger than the kit's provenance rule: dedupe only ever receipts whole tool outputs.
        for (const s of allStrings(out.value)) {
          const receipt = parseReceipt(s.split('\n').at(-1)!);
          if (receipt !== undefined) expect(originals.has(await recover(vault, receipt.artifactId))).toBe(true);
        }
        // Every tool output is the caller's own value (same object, same shape) or ends in a receipt.
        const outputs = (r: ProviderRequest) => readRequest(r).slots.filter((s) => s.kind === 'tool_output').map((s) => s.value);
        const [inputs, results] = [outputs(req), outputs(out.value)];
        expect(results).toHaveLength(inputs.length);
        results.forEach((v, k) => {
          if (v !== inputs[k]) expect(typeof v === 'string' && parseReceipt(v.split('\n').at(-1)!) !== undefined, `output ${k}`).toBe(true);
        });
      }
    },
  );
});

describe('collapseDuplicates — two processes', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tt-dedupe-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('lets exactly one of two racing processes keep the same artifact inline', async () => {
    const db = join(dir, 'vault.sqlite3');
    const init = await createVault({ path: db });
    await init.close();
    const go = join(dir, 'go');
    const worker = join(import.meta.dirname, '../compile/dedupe-worker.ts');
    const start = (id: string) => {
      const child = spawn(process.execPath, ['--import', 'tsx', worker, db, 'race', id, go], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      const ready = new Promise<void>((resolve) => child.stdout.on('data', (d: Buffer) => { out += d.toString(); if (out.includes('ready')) resolve(); }));
      const done = new Promise<string>((resolve, reject) => child.on('exit', (code) => (code === 0 ? resolve(out.replace('ready\n', '').trim()) : reject(new Error(`worker exit ${code}`)))));
      return { ready, done };
    };
    const workers = [start('p1'), start('p2')];
    await Promise.all(workers.map((w) => w.ready));
    writeFileSync(go, 'go');
    const results = await Promise.all(workers.map((w) => w.done));
    expect(results.sort()).toEqual(['inline', 'receipt']);
  }, 60_000);
});
