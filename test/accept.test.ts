import { describe, expect } from 'vitest';
import { fc, it } from '@fast-check/vitest';
import { acceptCandidate, strictlySmaller, type TokenPair } from '../src/accept.js';
import { codePoints } from '../src/measure/index.js';
import type { TokenCounter } from '../src/measure/types.js';

/** A deterministic counter in which escapes and quotes weigh differently from letters. */
const weighted: TokenCounter = {
  name: 'weighted',
  exact: true,
  count: (t) => [...t].reduce((n, ch) => n + (ch === '\\' ? 3 : ch === '"' ? 2 : /\s/.test(ch) ? 0 : 1), 0),
};
const text = fc.string({ unit: fc.constantFrom('a', 'b', ' ', '\n', '"', '\\', 'é'), maxLength: 40 });
const pair = fc.record({ raw: fc.nat(100), candidate: fc.nat(100) });

describe('acceptCandidate', () => {
  it.prop([fc.nat(100), fc.nat(100), fc.option(pair, { nil: undefined }), fc.option(pair, { nil: undefined })])(
    'accepts exactly: chars strictly smaller, tokens strictly smaller, and near a tie the wire forms too',
    (rawChars, candidateChars, tokens, wire) => {
      const verdict = acceptCandidate({
        rawChars,
        candidateChars,
        receipts: [],
        ...(tokens === undefined ? {} : { tokens: () => tokens }),
        ...(wire === undefined ? {} : { wireTokens: () => wire }),
      });
      const expected =
        candidateChars < rawChars &&
        (tokens === undefined ||
          (tokens.candidate < tokens.raw &&
            (wire === undefined || tokens.candidate * 10 < tokens.raw * 9 || wire.candidate < wire.raw)));
      expect(verdict.accepted).toBe(expected);
    },
  );

  it('asks for tokens only once the chars pass, and for the wire forms only near a tie', () => {
    const asked: string[] = [];
    const tokens = (t: TokenPair) => () => (asked.push('tokens'), t);
    const wireTokens = () => (asked.push('wire'), { raw: 1, candidate: 0 });
    acceptCandidate({
      rawChars: 5,
      candidateChars: 5,
      tokens: tokens({ raw: 9, candidate: 1 }),
      wireTokens,
      receipts: [],
    });
    expect(asked).toEqual([]);
    acceptCandidate({
      rawChars: 5,
      candidateChars: 4,
      tokens: tokens({ raw: 10, candidate: 8 }),
      wireTokens,
      receipts: [],
    });
    expect(asked).toEqual(['tokens']);
    acceptCandidate({
      rawChars: 5,
      candidateChars: 4,
      tokens: tokens({ raw: 10, candidate: 9 }),
      wireTokens,
      receipts: [],
    });
    expect(asked).toEqual(['tokens', 'tokens', 'wire']);
  });

  it('refuses a candidate naming an artifact that was not read back, whatever its sizes', () => {
    const receipts = [
      { artifactId: 'a_1', verified: true },
      { artifactId: 'a_2', verified: false },
    ];
    expect(acceptCandidate({ rawChars: 900, candidateChars: 1, receipts })).toEqual({
      accepted: false,
      reason: 'unverified receipt',
    });
  });
});

describe('strictlySmaller', () => {
  it.prop([text, text])('compares code points when no counter is given', (raw, candidate) => {
    expect(strictlySmaller(raw, candidate)).toBe(codePoints(candidate) < codePoints(raw));
  });

  it.prop([text, text])(
    'with a counter: fewer code points, fewer tokens, and near a tie fewer tokens of the JSON strings',
    (raw, candidate) => {
      const [r, c] = [weighted.count(raw), weighted.count(candidate)];
      const wire = weighted.count(JSON.stringify(candidate)) < weighted.count(JSON.stringify(raw));
      expect(strictlySmaller(raw, candidate, weighted)).toBe(
        codePoints(candidate) < codePoints(raw) && c < r && (c * 10 < r * 9 || wire),
      );
    },
  );

  it('refuses a text that is smaller as text but larger as the JSON string a host sends', () => {
    // 10 letters and a space → 10 tokens; the candidate, 9 letters and a newline → 9 tokens (a near
    // tie); as JSON strings the newline becomes a `\n` escape and the candidate costs more.
    const raw = 'aaaaa aaaaa';
    const candidate = 'aaaa\naaaaa';
    expect(codePoints(candidate)).toBeLessThan(codePoints(raw));
    expect(weighted.count(candidate)).toBeLessThan(weighted.count(raw));
    expect(strictlySmaller(raw, candidate, weighted)).toBe(false);
    expect(strictlySmaller(raw, 'aaaa\naaaa', weighted)).toBe(true); // far from a tie: plain counts decide
  });
});
