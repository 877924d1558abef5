import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { anyText } from '../../src/testing/index.js';
import { artifactIdFor, sha256Hex } from '../../src/vault/index.js';
import { codePoints } from '../../src/measure/canonical-json.js';
import { clipCodePoints, foldCase, isWellFormedText, sliceCodePoints } from '../../src/vault/identity.js';

describe('artifact identity', () => {
  it('matches the reference id vectors', () => {
    expect(artifactIdFor('result')).toBe('a_f6a214f7a5fcda0c2cee9660b7fc29f5');
    expect(artifactIdFor('')).toBe('a_e3b0c44298fc1c149afbf4c8996fb924');
    expect(artifactIdFor('evidence αβγ\n')).toBe('a_c2d2e24775ccc58a68150bda9ba8c0a6');
    expect(artifactIdFor('E'.repeat(400))).toBe('a_80eeb7e263105329814b1c2bbc602587');
  });

  it('hashes the UTF-8 bytes', () => {
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sha256Hex('😀')).toBe(sha256Hex(Buffer.from([0xf0, 0x9f, 0x98, 0x80]).toString('utf8')));
  });

  it('hashes a lone surrogate as U+FFFD (the only UTF-8 form it has)', () => {
    expect(sha256Hex('a\ud800b')).toBe(sha256Hex('a\ufffdb'));
    expect(isWellFormedText('a\ud800b')).toBe(false);
    expect(isWellFormedText('\udc00')).toBe(false);
    expect(isWellFormedText('😀')).toBe(true);
  });
});

describe('code points', () => {
  it('counts a surrogate pair once', () => {
    expect(codePoints('a😀b')).toBe(3);
    expect(codePoints('')).toBe(0);
    expect(codePoints('\ud800')).toBe(1);
  });

  test.prop([anyText({ maxLength: 60 }), fc.nat(70), fc.nat(70)])('slices like Array.from', (s, offset, count) => {
    const cps = Array.from(s);
    expect(sliceCodePoints(s, offset, count, codePoints(s))).toBe(cps.slice(offset, offset + count).join(''));
    expect(codePoints(s)).toBe(cps.length);
  });

  it('clips with an ellipsis', () => {
    expect(clipCodePoints('abcdef', 4)).toBe('abc…');
    expect(clipCodePoints('abc', 4)).toBe('abc');
    expect(clipCodePoints('😀😀😀😀😀', 3)).toBe('😀😀…');
  });
});

describe('case folding', () => {
  it('folds like casefold for German sharp s and final sigma', () => {
    expect(foldCase('Straße FEHLER Übergröße')).toBe('strasse fehler übergrösse');
    expect(foldCase('ÜBERGRÖSSE')).toBe(foldCase('übergröße'));
    expect(foldCase('ΟΔΟΣ')).toBe(foldCase('οδοσ'));
  });
});
