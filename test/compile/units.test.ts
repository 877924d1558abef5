import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { acceptCandidate } from '../../src/accept.js';
import { createChainMemo } from '../../src/compile/conversation.js';
import { isFailureLine } from '../../src/compact/diagnostic-lines.js';
import { exitStatusOf, renderDigest } from '../../src/compile/digest.js';
import { chooseBatch } from '../../src/compile/economics.js';
import { PRICING_PROFILES } from '../../src/config/pricing.js';
import { boundedView } from '../../src/compile/duplicates.js';
import { evidenceText } from '../../src/compile/evidence.js';
import { createMeter } from '../../src/ledger/request-meter.js';
import { sealedSteps, segmentSteps } from '../../src/compile/steps.js';
import { canonicalJson, serializedChars } from '../../src/measure/index.js';
import { readRequest } from '../../src/model/index.js';

describe('acceptCandidate', () => {
  const ok = [{ artifactId: 'a_1', verified: true }];
  it('accepts only a strictly smaller payload', () => {
    expect(acceptCandidate({ rawChars: 10, candidateChars: 9, receipts: ok })).toEqual({ accepted: true });
    expect(acceptCandidate({ rawChars: 10, candidateChars: 10, receipts: ok })).toMatchObject({
      accepted: false,
      reason: 'not smaller in chars',
    });
  });
  it('rejects a char-only win when exact tokens grew or stayed', () => {
    expect(
      acceptCandidate({ rawChars: 10, candidateChars: 5, tokens: () => ({ raw: 3, candidate: 3 }), receipts: ok }),
    ).toMatchObject({ reason: 'not smaller in tokens' });
    expect(
      acceptCandidate({ rawChars: 10, candidateChars: 5, tokens: () => ({ raw: 3, candidate: 2 }), receipts: ok }),
    ).toEqual({ accepted: true });
  });
  it('rejects a receipt whose artifact was not read back', () => {
    expect(
      acceptCandidate({ rawChars: 10, candidateChars: 5, receipts: [{ artifactId: 'a_1', verified: false }] }),
    ).toMatchObject({ reason: 'unverified receipt' });
  });
});

describe('segmentSteps and sealedSteps', () => {
  it('starts a step at user text and at an assistant answering tool results', () => {
    const view = readRequest({
      messages: [
        { role: 'system', content: 's' },
        { role: 'user', content: 'demo' },
        { role: 'user', content: 'task' },
        {
          role: 'assistant',
          content: 'a',
          tool_calls: [{ id: '1', type: 'function', function: { name: 'bash', arguments: '{}' } }],
        },
        { role: 'tool', tool_call_id: '1', content: 'out' },
        { role: 'assistant', content: 'b' },
        { role: 'assistant', content: 'c' },
      ],
    });
    expect(segmentSteps(view.itemInfo)).toEqual({ headEnd: 1, starts: [1, 2, 5], runs: 2, length: 7 });
  });
  it('moves the sealed horizon only in whole blocks', () => {
    const seq = Array.from({ length: 20 }, (_, s) => sealedSteps(s, 4, 5));
    expect(seq).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12]);
    expect(sealedSteps(3, 0, 1)).toBe(2);
  });
});

describe('the cache-economic rewrite rule', () => {
  const openai = PRICING_PROFILES.openai;
  const anthropic = PRICING_PROFILES.anthropic;
  it('replaces a large output at the tail of the previous request: the rewrite already pays in this request', () => {
    const answer = chooseBatch({
      size: 60_000,
      cachedEnd: 55_000,
      requestsAhead: 1,
      pricing: openai,
      candidates: [{ position: 50_000, saved: 4_800 }],
    });
    expect(answer).toMatchObject({ from: 0 });
    // Reading 5,000 cached chars at 0.1 costs more than writing a 200-char rendering at 1.0.
    expect(answer!.now).toBeLessThan(0);
  });
  it('leaves a small saving far back in the history alone, and takes it once enough requests remain to repay the lost cache', () => {
    const question = {
      size: 100_000,
      cachedEnd: 95_000,
      pricing: openai,
      candidates: [{ position: 30_000, saved: 3_000 }],
    };
    // Rewriting from 30k loses the cache on 65k chars: 0.9 × 62k ≈ 55.8k now, 0.1 × 3k = 300 per request later.
    expect(chooseBatch({ ...question, requestsAhead: 100 })).toBeUndefined();
    expect(chooseBatch({ ...question, requestsAhead: 200 })).toMatchObject({ from: 0 });
  });
  it('takes the batch with the best net saving: the tail alone when an older candidate does not pay for its cache loss', () => {
    const answer = chooseBatch({
      size: 100_000,
      cachedEnd: 95_000,
      requestsAhead: 10,
      pricing: openai,
      candidates: [
        { position: 30_000, saved: 1_000 },
        { position: 90_000, saved: 4_800 },
      ],
    });
    expect(answer).toMatchObject({ from: 1 });
    // With many requests ahead the older one joins the batch.
    expect(
      chooseBatch({
        size: 100_000,
        cachedEnd: 95_000,
        requestsAhead: 5000,
        pricing: openai,
        candidates: [
          { position: 30_000, saved: 1_000 },
          { position: 90_000, saved: 4_800 },
        ],
      }),
    ).toMatchObject({ from: 0 });
  });
  it('prices cache writes: a rewrite that pays under OpenAI-style pricing can fail to under Anthropic-style', () => {
    const question = { size: 100_000, cachedEnd: 95_000, candidates: [{ position: 60_000, saved: 4_000 }] };
    // Now: OpenAI 0.1 × 60k + 36k − 14.5k = 27.5k, Anthropic 0.1 × 60k + 1.25 × 36k − 15.75k = 35.25k; later 400 per request.
    expect(chooseBatch({ ...question, requestsAhead: 75, pricing: openai })).toBeDefined();
    expect(chooseBatch({ ...question, requestsAhead: 75, pricing: anthropic })).toBeUndefined();
  });
  it('below the minimum cacheable prefix there is no cache to lose: any saving pays', () => {
    const tiny = chooseBatch({
      size: 3_000,
      cachedEnd: 2_800,
      requestsAhead: 1,
      pricing: openai,
      candidates: [{ position: 1_000, saved: 1_200 }],
    });
    expect(tiny).toMatchObject({ from: 0 });
    expect(
      chooseBatch({ size: 3_000, cachedEnd: 2_800, requestsAhead: 1, pricing: openai, candidates: [] }),
    ).toBeUndefined();
  });
});

describe('digests', () => {
  it('keep the first line, the exit status, the failure lines within the budget and end in the receipt', () => {
    const text = [
      'collected 12 items',
      ...Array.from({ length: 40 }, (_, i) => `tests/test_a.py::test_${i} PASSED`),
      'FAILED tests/test_b.py::test_x - AssertionError: 1 != 2',
      'E       assert 1 == 2',
      '[exit code: 1]',
    ].join('\n');
    const digest = renderDigest(text, 'RECEIPT', { diagnosticChars: 400 });
    expect(digest.split('\n')).toEqual([
      '[Token Terminator digest | 44 lines | exit 1 | 1 failed]',
      'collected 12 items',
      'FAILED tests/test_b.py::test_x - AssertionError: 1 != 2',
      'E       assert 1 == 2',
      'RECEIPT',
    ]);
    expect(renderDigest(text, 'RECEIPT', { diagnosticChars: 0 }).split('\n')).toHaveLength(3);
    expect(exitStatusOf('<returncode>2</returncode>\n<output>x</output>')).toBe(2);
    expect(exitStatusOf('all good')).toBeUndefined();
  });
  it('never take numbered source lines of an editor view for failure lines', () => {
    expect(isFailureLine('123:        throw new IllegalStateException("boom");')).toBe(false);
    expect(isFailureLine('java.lang.IllegalStateException: boom')).toBe(true);
  });
});

describe('conversation keys', () => {
  it('give an item the same key exactly when the history up to it is the same', () => {
    const memo = createChainMemo();
    const hash = (it: unknown): string => canonicalJson(it);
    const a = memo.hashes(['s', 'task A', 'x', 'y'], hash);
    const b = memo.hashes(['s', 'task B', 'x', 'y'], hash);
    const c = createChainMemo().hashes(['s', 'task A', 'x', 'y', 'z'], hash);
    expect(b[0]).toBe(a[0]);
    expect(b[2]).not.toBe(a[2]);
    expect(c.slice(0, 4)).toEqual(a);
  });

  it('follow a caller array changed in place after the previous call', () => {
    const memo = createChainMemo();
    const hash = (it: unknown): string => canonicalJson(it);
    const items: unknown[] = ['s', 'task A', 'x'];
    memo.hashes(items, hash);
    items[1] = 'task B';
    items.push('y');
    expect(memo.hashes(items, hash)).toEqual(createChainMemo().hashes(['s', 'task B', 'x', 'y'], hash));
  });
});

describe('evidence and views', () => {
  it('vaults strings and text-only part lists, never receipts or images', () => {
    expect(evidenceText('abc')).toBe('abc');
    expect(evidenceText([{ type: 'text', text: 'x' }])).toBe(canonicalJson([{ type: 'text', text: 'x' }]));
    expect(evidenceText([{ type: 'image', source: {} }])).toBeUndefined();
    expect(
      evidenceText(
        '[Token Terminator artifact a_0123456789abcdef0123456789abcdef | tool=x | chars=3 | recover with token_terminator action=artifact_get]',
      ),
    ).toBeUndefined();
  });
  it('keeps whole head and tail lines within the budget and says how many were left out', () => {
    const text = Array.from({ length: 1000 }, (_, i) => `line ${i}`).join('\n');
    const view = boundedView(text, 400);
    expect(view.length).toBeLessThanOrEqual(400 + 80);
    expect(view.startsWith('line 0\nline 1\n')).toBe(true);
    expect(view.endsWith('line 998\nline 999')).toBe(true);
    expect(view).toMatch(/\u2026 \d+ lines omitted/);
    expect(boundedView('short', 400)).toBe('short');
  });
});

describe('meter', () => {
  it('sums per-item sizes into the exact request size and memoizes by identity', () => {
    const req = {
      model: 'm',
      messages: [
        { role: 'user', content: 'héllo 😀' },
        { role: 'assistant', content: 'x' },
      ],
      temperature: 0.5,
    };
    const meter = createMeter();
    expect(meter.requestChars(req, 'messages', req.messages)).toBe(serializedChars(req));
    const first = meter.measure(req.messages[0]);
    expect(meter.measure(req.messages[0])).toBe(first);
    expect(meter.measure(structuredClone(req.messages[0]))).toBe(first);
  });

  // Each step: grow the last list, cut it, edit one item, or go back to an earlier list.
  const step = fc.tuple(fc.constantFrom('grow', 'cut', 'edit', 'back'), fc.nat(), fc.nat({ max: 4 }));
  test.prop([fc.array(step, { minLength: 1, maxLength: 30 })])(
    'carried running sums are the sums of the list asked for, whatever lists came before',
    (steps) => {
      const meter = createMeter();
      const lists: unknown[][] = [[]];
      for (const [kind, at, n] of steps) {
        const last = lists.at(-1)!;
        const item = (k: number): unknown => ({ role: 'user', content: 'x'.repeat(k % 7) + String(k) });
        const list =
          kind === 'grow'
            ? [...last, ...Array.from({ length: n + 1 }, (_, k) => item(at + k))]
            : kind === 'cut'
              ? last.slice(0, at % (last.length + 1))
              : kind === 'edit' && last.length > 0
                ? last.map((x, k) => (k === at % last.length ? item(at + 100) : x))
                : lists[at % lists.length]!;
        lists.push(list);
        let sum = 0;
        const want = list.map((x) => (sum += serializedChars(x)));
        expect(meter.cumulativeChars(list).slice(0, list.length)).toEqual(want);
        expect(meter.requestChars({ messages: list }, 'messages', list)).toBe(serializedChars({ messages: list }));
      }
    },
  );
});
