import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { fc, it, test } from '@fast-check/vitest';
import { TestScheduler } from 'rxjs/testing';
import { collapseDuplicates } from '../../operators/collapse-duplicates.js';
import { case3Request, case4Request } from '../../src/cli/bench/request-cases.js';
import { evidenceText } from '../../src/compile/evidence.js';
import { readRequest } from '../../src/model/index.js';
import { parseReceipt } from '../../src/receipts/index.js';
import { diagnosticLines } from '../../src/measure/diagnostic-ruler.js';
import { createStep, type ProviderRequest } from '../../src/step.js';
import { createVault } from '../../src/vault/index.js';
import type { StoreScope, Vault } from '../../src/vault/types.js';
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
  type RequestOptions,
  faultyVault,
} from '../../src/testing/index.js';
import { allStrings, recover, runAll } from '../compile/helpers.js';
import { propertyDeps, REQUEST_INVARIANTS } from '../support/properties.js';

const ART = 'diagnostic evidence line\n'.repeat(200); // 5000 chars
const contentAt = (r: ProviderRequest, i: number): unknown => (r['messages'] as { content?: unknown }[])[i]!.content;

describe('collapseDuplicates — unit', () => {
  let vault: Vault;
  beforeAll(async () => {
    vault = await createVault({ path: ':memory:' });
  });
  afterAll(async () => vault.close());
  const op = (extra: object = {}) => collapseDuplicates({ vault, minArtifactChars: 1000, ...extra });

  it('shows a new large output inline on every request: it never replaces what the model has not seen', async () => {
    const req = deepFreeze(case3Request(ART));
    const before = structuredClone(req);
    const [first, retry, next] = await runAll(op(), [
      [req, { sessionId: 'inline', requestId: 'r1' }],
      [req, { sessionId: 'inline', requestId: 'r1' }],
      [req, { sessionId: 'inline', requestId: 'r2' }],
    ]);
    expect(first!.value).toBe(req);
    expect(retry!.value).toBe(req);
    expect(next!.value).toBe(req);
    expect(req).toEqual(before);
  });

  it('keeps only the newest copy of a duplicate that arrived with the request inline', async () => {
    const req = deepFreeze(case4Request(ART));
    const [out, retry] = await runAll(op(), [
      [req, { sessionId: 'dup', requestId: 'd1' }],
      [req, { sessionId: 'dup', requestId: 'd1' }],
    ]);
    const receipt = parseReceipt(String(contentAt(out!.value, 2)));
    expect(receipt).toMatchObject({ tool: 'tool', chars: ART.length });
    expect(await recover(vault, receipt!.artifactId)).toBe(ART);
    expect(contentAt(out!.value, 4)).toBe(ART);
    expect(out!.decisions.at(-1)).toMatchObject({
      stage: 'collapseDuplicates',
      kind: 'applied',
      reason: '1 duplicate(s) collapsed',
    });
    expect(retry!.value).toEqual(out!.value);
  });

  it('leaves an earlier copy the conversation already had alone when the output comes back (history rewrites own it)', async () => {
    const first = deepFreeze(case3Request(ART));
    const messages = [
      ...(first['messages'] as unknown[]),
      {
        role: 'assistant',
        tool_calls: [{ id: 'call-2', type: 'function', function: { name: 'terminal', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'call-2', content: ART },
    ];
    const second = deepFreeze({ ...first, messages });
    const [, out] = await runAll(op(), [
      [first, { sessionId: 'again', requestId: 'a1' }],
      [second, { sessionId: 'again', requestId: 'a2' }],
    ]);
    expect(out!.value).toBe(second);
  });

  it('a bounded view keeps the lines naming what the conversation before the output is about, the same in every request', async () => {
    const rows = Array.from({ length: 3000 }, (_, i) => `src/pkg${i % 30}/Module${i}.java`);
    rows[2100] = 'src/pkg0/OrderParser.java';
    const huge = rows.join('\n');
    const ask = (task: string): ProviderRequest => {
      const r = case3Request(huge);
      const messages = r['messages'] as Record<string, unknown>[];
      return { ...r, messages: [messages[0], { role: 'user', content: task }, ...messages.slice(2)] };
    };
    const [focused, plain] = await runAll(op({ maxInlineChars: 10_000, inlineViewChars: 2000 }), [
      [ask('Fix the `OrderParser` rounding.'), { sessionId: 'focus-a', requestId: '1' }],
      [ask('Fix the rounding.'), { sessionId: 'focus-b', requestId: '1' }],
    ]);
    const text = String(contentAt(focused!.value, 3));
    expect(text).toContain(
      '\n[lines of the full output that mention names from this conversation, left out above]\nsrc/pkg0/OrderParser.java\n',
    );
    expect(String(contentAt(plain!.value, 3))).not.toContain('OrderParser');
    // A later request of the same conversation (one more turn) renders the view byte for byte.
    const next = ask('Fix the `OrderParser` rounding.');
    const grown = {
      ...next,
      messages: [
        ...(next['messages'] as unknown[]),
        { role: 'assistant', content: 'Looking at `OtherThing`.' },
        { role: 'user', content: 'go on' },
      ],
    };
    const [again] = await runAll(op({ maxInlineChars: 10_000, inlineViewChars: 2000 }), [
      [grown, { sessionId: 'focus-a', requestId: '2' }],
    ]);
    expect(String(contentAt(again!.value, 3))).toBe(text);
  });

  it('shows an oversized output as a bounded view that keeps the failure lines of the part it leaves out', async () => {
    const rows = Array.from({ length: 3000 }, (_, i) => `row ${i} payload`);
    rows[1500] = 'FAILED tests/test_core.py::test_merge - AssertionError: 3 != 4';
    rows[1501] = 'E       assert merge(a, b) == 4';
    const huge = rows.join('\n');
    const [out] = await runAll(op({ maxInlineChars: 10_000, inlineViewChars: 2000 }), [
      [case3Request(huge), { sessionId: 'view', requestId: 'v1' }],
    ]);
    const text = String(contentAt(out!.value, 3));
    expect(text.startsWith('row 0 payload\n')).toBe(true);
    expect(text).toContain(`\n${rows[1500]}\n`);
    expect(text).toContain(`\n${rows[1501]}\n`);
    // The failure lines come with the line before and after them.
    expect(text).toMatch(
      /\u2026 \d+ lines omitted \(exact output: see the receipt below\) \u2026\nrow 1499 payload\nFAILED[^\n]*\nE[^\n]*\nrow 1502 payload\n\u2026/u,
    );
    const last = text.split('\n').at(-1)!;
    expect(await recover(vault, parseReceipt(last)!.artifactId)).toBe(huge);
    expect(text.length).toBeLessThan(2500);
    expect(out!.decisions.at(-1)).toMatchObject({ kind: 'applied', reason: '1 bounded view(s)' });
    // Credited to the view, not to collapsing duplicates: nothing was duplicated.
    expect(out!.decisions.filter((d) => d.kind === 'applied').map((d) => d.stage)).toEqual(['boundedView']);
  });

  // Real captured failing runs, buried in a long passing log (before or after it): the view keeps
  // every diagnostic line replay counts (its own, independent pattern; the first 20 per output).
  for (const fixture of [
    'pytest-fail.txt',
    'vitest-fail.txt',
    'go-test-fail.txt',
    'cargo-test-fail.txt',
    'mvn-offline-fail.txt',
    'npm-install-fail.txt',
    'tsc-errors.txt',
    'javac-errors.txt',
    'eslint-fail.txt',
    'go-vet.txt',
    'python-traceback.txt',
  ]) {
    it(`keeps every diagnostic line of a large failing output in its bounded view (${fixture})`, async () => {
      const failing = readFileSync(join(import.meta.dirname, '../fixtures/terminal', fixture), 'utf8');
      const passing = Array.from({ length: 3000 }, (_, i) => `tests/test_ok_${i}.py::test_case PASSED`).join('\n');
      for (const [k, text] of [`${passing}\n${failing}`, `${failing}\n${passing}`].entries()) {
        const [out] = await runAll(op(), [
          [case3Request(text), { sessionId: `faithful-${fixture}-${k}`, requestId: 'f' }],
        ]);
        const view = String(contentAt(out!.value, 3));
        expect(view.length).toBeLessThan(8400);
        const lines = diagnosticLines(text);
        expect(lines.length).toBeGreaterThan(0);
        expect(lines.filter((l) => !view.includes(l))).toEqual([]);
      }
    });
  }

  it('shows bounded views of Responses outputs and Anthropic tool_result blocks in place', async () => {
    const huge = 'evidence row\n'.repeat(4000);
    const responses = deepFreeze({
      input: [
        { role: 'user', content: 'go' },
        { type: 'function_call', call_id: 'c1', name: 'read_file', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c1', output: huge },
      ],
    });
    const anthropic = deepFreeze({
      system: 's',
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'bash', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: huge }] },
      ],
    });
    const outs = await runAll(op({ maxInlineChars: 10_000, inlineViewChars: 2000 }), [
      [responses, { sessionId: 'fmt', requestId: '1' }],
      [anthropic, { sessionId: 'fmt', requestId: '2' }],
    ]);
    const item = (outs[0]!.value['input'] as Record<string, unknown>[])[2]!;
    expect(item).toMatchObject({ type: 'function_call_output', call_id: 'c1' });
    expect(parseReceipt(String(item['output']).split('\n').at(-1)!)).toMatchObject({ tool: 'read_file' });
    const block = (outs[1]!.value['messages'] as { content: Record<string, unknown>[] }[])[2]!.content[0]!;
    expect(block).toMatchObject({ type: 'tool_result', tool_use_id: 't1' });
    expect(parseReceipt(String(block['content']).split('\n').at(-1)!)).toMatchObject({ tool: 'bash' });
  });

  it('replaces a delta against an output the request does not show by the output it stands for, and keeps one whose base is shown', async () => {
    // Vaulted by the tool stage of the session the delta is delivered to (a delta is read in its scope).
    const current = await vault.put({ content: ART, toolName: 'terminal' }, { sessionId: 'reused' });
    const previous = await vault.put(
      { content: 'older output\n'.repeat(300), toolName: 'terminal' },
      { sessionId: 'reused' },
    );
    const delta = (prev: string) =>
      `[Token Terminator temporal delta: no output changes since the previous execution | current=${current.artifactId} | previous=${prev} | recover exact current output with token_terminator action=artifact_get]`;
    // A new conversation under a reused session id: the tool stage answered with a delta against an output it never showed.
    const unseen = deepFreeze(case3Request(delta(previous.artifactId)));
    const [resolved] = await runAll(op(), [[unseen, { sessionId: 'reused', requestId: 'u1' }]]);
    expect(contentAt(resolved!.value, 3)).toBe(ART);
    expect(resolved!.decisions.at(-1)).toMatchObject({
      stage: 'collapseDuplicates',
      kind: 'applied',
      reason: expect.stringMatching(/^1 delta\(s\) against an output the request does not show/u),
    });
    // The same delta right after its base, shown inline: it stays.
    const base = 'older output\n'.repeat(300);
    const shown = deepFreeze({
      messages: [
        { role: 'user', content: 'go' },
        {
          role: 'assistant',
          tool_calls: [{ id: 'p', type: 'function', function: { name: 'terminal', arguments: '{}' } }],
        },
        { role: 'tool', tool_call_id: 'p', content: base },
        {
          role: 'assistant',
          tool_calls: [{ id: 'q', type: 'function', function: { name: 'terminal', arguments: '{}' } }],
        },
        { role: 'tool', tool_call_id: 'q', content: delta(previous.artifactId) },
      ],
    });
    const [kept] = await runAll(op(), [[shown, { sessionId: 'base-shown', requestId: 's1' }]]);
    expect(kept!.value).toBe(shown);
    // The vault cannot return the output: the delta stays, and the decision says so.
    const gone = deepFreeze(
      case3Request(delta(previous.artifactId).replace(current.artifactId, `a_${'9'.repeat(32)}`)),
    );
    const [failed] = await runAll(op(), [[gone, { sessionId: 'gone', requestId: 'g1' }]]);
    expect(failed!.value).toBe(gone);
    expect(failed!.decisions.at(-1)).toMatchObject({
      kind: 'failed_open',
      reason: expect.stringMatching(/dangling delta/u),
    });
    // Another tenant's session of the same id: the delta names an artifact outside its scope, so
    // the vault does not return it and the delta stays as text (the content never reaches it).
    const [foreign] = await runAll(op(), [[unseen, { sessionId: 'reused', tenant: 'other', requestId: 'u2' }]]);
    expect(foreign!.value).toBe(unseen);
    expect(foreign!.decisions.at(-1)).toMatchObject({
      kind: 'failed_open',
      reason: expect.stringMatching(/dangling delta/u),
    });
  });

  it('delivers (pins for its session) the artifacts its receipts name', async () => {
    const pinned: string[] = [];
    const spy = new Proxy(vault, {
      get: (t, k) =>
        k === 'deliver'
          ? async (ids: readonly string[], scope?: StoreScope) => {
              pinned.push(...ids);
              return t.deliver(ids, scope);
            }
          : Reflect.get(t, k, t),
    });
    const [out] = await runAll(collapseDuplicates({ vault: spy, minArtifactChars: 1000 }), [
      [case4Request(ART), { sessionId: 'pin', requestId: 'a' }],
    ]);
    expect(pinned).toEqual([parseReceipt(String(contentAt(out!.value, 2)))!.artifactId]);
  });

  it('leaves an output inline when the vault cannot store it', async () => {
    const broken = faultyVault(vault, { failOn: ['put'] });
    const req = case4Request('other evidence\n'.repeat(200));
    const [out] = await runAll(collapseDuplicates({ vault: broken, minArtifactChars: 1000 }), [
      [req, { sessionId: 'broken', requestId: '1' }],
    ]);
    expect(out!.value).toBe(req);
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
        {
          role: 'assistant',
          content: ['t1', 't2', 't3'].map((id) => ({ type: 'tool_use', id, name: 'bash', input: {} })),
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 't1', content: ART },
            { type: 'tool_result', tool_use_id: 't2', content: ART },
            { type: 'tool_result', tool_use_id: 't3', content: blocks },
          ],
        },
      ],
    });
    const parts = [
      { type: 'text', text: 'chat part one\n'.repeat(60) },
      { type: 'text', text: 'chat part two\n'.repeat(60) },
    ];
    const chat = deepFreeze({
      messages: [
        { role: 'user', content: 'go' },
        {
          role: 'assistant',
          tool_calls: ['c1', 'c2', 'c3'].map((id) => ({
            id,
            type: 'function',
            function: { name: 'bash', arguments: '{}' },
          })),
        },
        { role: 'tool', tool_call_id: 'c1', content: ART },
        { role: 'tool', tool_call_id: 'c2', content: ART },
        { role: 'tool', tool_call_id: 'c3', content: parts },
      ],
    });
    // Separate sessions, so each request is the first its session sees.
    const [a, c] = await runAll(op(), [
      [anthropic, { sessionId: 'blocks', requestId: 'b1' }],
      [chat, { sessionId: 'blocks-chat', requestId: 'b2' }],
    ]);
    for (const out of [a!, c!])
      expect(out.decisions.at(-1)).toMatchObject({ kind: 'applied', reason: '1 duplicate(s) collapsed' });
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
    const blocks = [
      { type: 'text', text: Array.from({ length: 1500 }, (_, i) => `row ${i} "quoted" payload`).join('\n') },
      { type: 'text', text: 'second block' },
    ];
    const req = deepFreeze({
      system: 's',
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'bash', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: blocks }] },
      ],
    });
    const [out] = await runAll(op({ maxInlineChars: 10_000, inlineViewChars: 2000 }), [
      [req, { sessionId: 'block-view', requestId: 'v1' }],
    ]);
    const text = String((out!.value['messages'] as { content: { content: unknown }[] }[])[2]!.content[0]!.content);
    expect(text.startsWith('row 0 "quoted" payload\nrow 1 "quoted" payload\n')).toBe(true);
    expect(text).not.toContain('\\n');
    expect(text).not.toContain('\\"');
    expect(text.split('\n').at(-3)).toBe('second block');
    expect(await recover(vault, parseReceipt(text.split('\n').at(-1)!)!.artifactId)).toBe(evidenceText(blocks));
    expect(text.length).toBeLessThan(2500);
  });

  it('validates options when built', () => {
    expect(() => collapseDuplicates({ vault, inlineViewChars: 10 })).toThrow(
      /collapseDuplicates: options\.inlineViewChars/,
    );
    expect(() => collapseDuplicates({ vault, minArtifactChars: 0 })).toThrow(/collapseDuplicates/);
    expect(() => collapseDuplicates({ vault, observations: '(' })).toThrow(/collapseDuplicates: options\.observations/);
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

const properties = await propertyDeps();

describe('collapseDuplicates — properties', () => {
  const { vault, counter } = properties;
  // Low thresholds so most generated outputs are large enough to receipt or show as a bounded view;
  // a hostile tool name checks the receipt label.
  const shapes: RequestOptions = { maxTurns: 5, sizes: ['tiny', 'medium'], tools: [...TOOL_NAMES, 'weird tool]\n'] };
  const lowThresholds = { minArtifactChars: 200, maxInlineChars: 400, inlineViewChars: 200 };

  describe('kit invariants (successive requests of one session)', () => {
    const op = withDeps<ProviderRequest>(({ vault: v, counter: c }) =>
      collapseDuplicates({ vault: v, ...(c === undefined ? {} : { counter: c }), ...lowThresholds }),
    );
    testInvariants(test, op, {
      vault,
      counter,
      inputs: requestStream({ ...shapes, maxLength: 3 }),
      only: [...REQUEST_INVARIANTS, 'prefix-kept', 'actions-kept', 'no-dangling-reference'],
      params: { numRuns: 20 },
    });
  });

  it('generated requests trigger bounded views and duplicate collapses (the properties are not vacuous)', async () => {
    const reasons = new Set<string>();
    for (const [k, request] of fc.sample(providerRequest(shapes), { numRuns: 30, seed: 42 }).entries()) {
      const outs = await runAll(collapseDuplicates({ vault, ...lowThresholds }), [
        [request, { sessionId: `coverage-${k}`, requestId: 'a' }],
      ]);
      for (const out of outs)
        for (const d of out.decisions)
          if (d.kind === 'applied') for (const r of d.reason.split(', ')) reasons.add(r.replace(/^\d+/u, 'N'));
    }
    expect([...reasons].sort()).toEqual(['N bounded view(s)', 'N duplicate(s) collapsed']);
  });

  let run = 0;
  test.prop([providerRequest(shapes)], { numRuns: 60 })(
    'a retry gives the same output; every output is unchanged or smaller, leaves the caller untouched and its receipts recover tool outputs exactly',
    async (request) => {
      const req = deepFreeze(structuredClone(request));
      const before = structuredClone(req);
      const sessionId = `prop-${run++}`;
      const op = collapseDuplicates({ vault, counter, ...lowThresholds });
      const [a, b, c] = await runAll(op, [
        [req, { sessionId, requestId: 'r1' }],
        [req, { sessionId, requestId: 'r1' }],
        [req, { sessionId, requestId: 'r2' }],
      ]);
      expect(firstDifference(before, req)).toBeUndefined();
      expect(b!.value).toEqual(a!.value);
      expect(c!.value).toEqual(a!.value);
      const originals = new Set(
        readRequest(req)
          .slots.filter((s) => s.kind === 'tool_output')
          .map((s) => evidenceText(s.value)),
      );
      for (const [i, out] of [a!, c!].entries()) {
        checkSmaller(req, out.value, `request ${i}`, counter);
        await checkRecovery(vault, [req], out, `request ${i}`);
        // Stronger than the kit's provenance rule: dedupe only ever receipts whole tool outputs.
        for (const s of allStrings(out.value)) {
          const receipt = parseReceipt(s.split('\n').at(-1)!);
          if (receipt !== undefined) expect(originals.has(await recover(vault, receipt.artifactId))).toBe(true);
        }
        // Every tool output is the caller's own value (same object, same shape) or ends in a receipt.
        const outputs = (r: ProviderRequest) =>
          readRequest(r)
            .slots.filter((s) => s.kind === 'tool_output')
            .map((s) => s.value);
        const [inputs, results] = [outputs(req), outputs(out.value)];
        expect(results).toHaveLength(inputs.length);
        results.forEach((v, k) => {
          if (v !== inputs[k])
            expect(typeof v === 'string' && parseReceipt(v.split('\n').at(-1)!) !== undefined, `output ${k}`).toBe(
              true,
            );
        });
      }
    },
  );
});
