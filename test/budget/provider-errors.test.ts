import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseOutputCapError, type OutputCapInfo } from '../../src/budget/index.js';

interface Case {
  readonly id: string;
  readonly source: string;
  readonly text: string;
  readonly expected: OutputCapInfo | null;
}

const cases = JSON.parse(
  readFileSync(new URL('../fixtures/provider-errors/cases.json', import.meta.url), 'utf8'),
) as Case[];

describe('parseOutputCapError on real error texts from public issue reports', () => {
  it('has fixtures for every wording family', () => {
    expect(cases.length).toBeGreaterThanOrEqual(20);
    expect(new Set(cases.map((c) => c.id)).size).toBe(cases.length);
    for (const c of cases) expect(c.source).toMatch(/^https:\/\/github\.com\//);
  });

  it.each(cases.map((c) => [c.id, c] as const))('%s', (_id, c) => {
    expect(parseOutputCapError(c.text) ?? null).toEqual(c.expected);
  });
});

describe('parseOutputCapError inputs', () => {
  const text = cases.find((c) => c.id === 'openrouter-nous-in-the-output')?.text ?? '';

  it('reads Error messages, SDK error objects, nested bodies and causes', () => {
    const expected = { availableOutputTokens: 236_907, contextLength: 256_000, kind: 'remaining' };
    expect(parseOutputCapError(new Error(text))).toEqual(expected);
    const sdkLike = Object.assign(new Error('400 status code (no body)'), {
      status: 400,
      error: { message: text, type: 'invalid_request_error' },
    });
    expect(parseOutputCapError(sdkLike)).toEqual(expected);
    expect(parseOutputCapError({ error: { metadata: { raw: text } } })).toEqual(expected);
    expect(parseOutputCapError(new Error('wrapped', { cause: new Error(text) }))).toEqual(expected);
  });

  it('returns undefined for unrelated input and for no room left', () => {
    expect(parseOutputCapError('some unrelated 400 error')).toBeUndefined();
    expect(parseOutputCapError(undefined)).toBeUndefined();
    expect(parseOutputCapError(42)).toBeUndefined();
    expect(
      parseOutputCapError('max_tokens: 8192 > context_window: 2000 - input_tokens: 2000 = available_tokens: 0'),
    ).toBeUndefined();
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    expect(parseOutputCapError(cyclic)).toBeUndefined();
  });

  it('accepts thousands separators', () => {
    expect(
      parseOutputCapError('maximum context length is 128,000 tokens. (1,000 of text input, 200,000 in the output)')
        ?.availableOutputTokens,
    ).toBe(127_000);
  });
});
