import { describe, expect, it } from 'vitest';
import { acceptCandidate } from '../../src/compile/accept.js';
import { collapseItems, collapseNoteLine, prefixNote } from '../../src/compile/collapse.js';
import { boundedView } from '../../src/compile/duplicates.js';
import { evidenceText } from '../../src/compile/evidence.js';
import { createMeter } from '../../src/compile/meter.js';
import { horizons, segmentSteps } from '../../src/compile/steps.js';
import { canonicalJson, serializedChars } from '../../src/measure/index.js';
import { readRequest } from '../../src/model/index.js';
import { referencedArtifacts } from '../../src/receipts/index.js';

describe('acceptCandidate', () => {
  const ok = [{ artifactId: 'a_1', verified: true }];
  it('accepts only a strictly smaller payload', () => {
    expect(acceptCandidate({ rawChars: 10, candidateChars: 9, receipts: ok })).toEqual({ accepted: true });
    expect(acceptCandidate({ rawChars: 10, candidateChars: 10, receipts: ok })).toMatchObject({ accepted: false, reason: 'not smaller in chars' });
  });
  it('rejects a char-only win when exact tokens grew or stayed', () => {
    expect(acceptCandidate({ rawChars: 10, candidateChars: 5, rawTokens: 3, candidateTokens: 3, receipts: ok })).toMatchObject({ reason: 'not smaller in tokens' });
    expect(acceptCandidate({ rawChars: 10, candidateChars: 5, rawTokens: 3, candidateTokens: 2, receipts: ok })).toEqual({ accepted: true });
  });
  it('rejects a receipt whose artifact was not read back', () => {
    expect(acceptCandidate({ rawChars: 10, candidateChars: 5, receipts: [{ artifactId: 'a_1', verified: false }] })).toMatchObject({ reason: 'unverified receipt' });
  });
});

describe('segmentSteps and horizons', () => {
  it('starts a step at user text and at an assistant answering tool results', () => {
    const view = readRequest({
      messages: [
        { role: 'system', content: 's' },
        { role: 'user', content: 'demo' },
        { role: 'user', content: 'task' },
        { role: 'assistant', content: 'a', tool_calls: [{ id: '1', type: 'function', function: { name: 'bash', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: '1', content: 'out' },
        { role: 'assistant', content: 'b' },
        { role: 'assistant', content: 'c' },
      ],
    });
    expect(segmentSteps(view.itemInfo)).toEqual({ headEnd: 1, starts: [1, 2, 5], stepOf: [-1, 0, 1, 1, 1, 2, 2] });
  });
  it('moves both horizons only in whole blocks', () => {
    const p = { blockSteps: 4, inlineRecentSteps: 5, collapseAfterSteps: 6 };
    const seq = Array.from({ length: 20 }, (_, s) => horizons(s, p));
    expect(seq.map((h) => h.sealed)).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12]);
    expect(seq.map((h) => h.collapsed)).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12]);
    expect(horizons(30, { ...p, collapseAfterSteps: 0 }).collapsed).toBe(0);
  });
});

describe('collapse notes', () => {
  it('names the artifact with Token Terminator on the same line', () => {
    const line = collapseNoteLine(0, 3, 9, 'a_0123456789abcdef0123456789abcdef', 1234);
    expect(line).not.toContain('\n');
    expect(referencedArtifacts(line)).toEqual(['a_0123456789abcdef0123456789abcdef']);
  });
  it('merges into the first retained user message, keeping image parts', () => {
    const user = { role: 'user', content: [{ type: 'text', text: 'q' }, { type: 'image_url', image_url: { url: 'x' } }] };
    expect(prefixNote('chat', user, 'NOTE')).toEqual({ role: 'user', content: [{ type: 'text', text: 'NOTE' }, ...user.content] });
    expect(prefixNote('responses', { role: 'user', content: 'q' }, 'NOTE')).toEqual({ role: 'user', content: 'NOTE\n\nq' });
  });
  it('carries the latest collapsed task text when the retained part starts with an assistant item', () => {
    const view = readRequest({
      messages: [
        { role: 'system', content: 's' },
        { role: 'user', content: 'task' },
        { role: 'assistant', content: 'a', tool_calls: [{ id: '1', type: 'function', function: { name: 'bash', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: '1', content: 'out' },
        { role: 'assistant', content: 'b' },
      ],
    });
    const out = collapseItems({ format: 'chat', items: view.items, info: view.itemInfo, headEnd: 1, cut: 4, note: 'NOTE' });
    expect(out).toEqual([view.items[0], { role: 'user', content: 'NOTE\n\ntask' }, view.items[4]]);
  });
});

describe('evidence and views', () => {
  it('vaults strings and text-only part lists, never receipts or images', () => {
    expect(evidenceText('abc')).toBe('abc');
    expect(evidenceText([{ type: 'text', text: 'x' }])).toBe(canonicalJson([{ type: 'text', text: 'x' }]));
    expect(evidenceText([{ type: 'image', source: {} }])).toBeUndefined();
    expect(evidenceText('[Token Terminator artifact a_0123456789abcdef0123456789abcdef | tool=x | chars=3 | recover with token_terminator action=artifact_get]')).toBeUndefined();
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
    const req = { model: 'm', messages: [{ role: 'user', content: 'héllo 😀' }, { role: 'assistant', content: 'x' }], temperature: 0.5 };
    const meter = createMeter();
    expect(meter.requestChars(req, 'messages', req.messages)).toBe(serializedChars(req));
    const first = meter.measure(req.messages[0]);
    expect(meter.measure(req.messages[0])).toBe(first);
    expect(meter.measure(structuredClone(req.messages[0]))).toBe(first);
  });
});
