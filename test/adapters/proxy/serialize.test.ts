import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { serializeRequest } from '../../../adapters/proxy/serialize.js';

const item = fc.oneof(fc.dictionary(fc.string(), fc.jsonValue()), fc.jsonValue());
const request = (key: string) =>
  fc
    .record({
      before: fc.dictionary(fc.string(), fc.jsonValue()),
      items: fc.array(item),
      after: fc.dictionary(fc.string(), fc.jsonValue()),
    })
    .map(({ before, items, after }) => ({ ...before, [key]: items, ...after }));

describe('serializeRequest', () => {
  test.prop([
    fc.constantFrom('messages', 'input').chain((key) => fc.tuple(fc.constant(key), request(key), request(key))),
  ])(
    'is byte-identical to JSON.stringify as UTF-8, for new items and for items seen before (shared between requests)',
    ([key, a, b]) => {
      const cache = new WeakMap<object, Buffer>();
      expect(serializeRequest(a, key, cache).equals(Buffer.from(JSON.stringify(a)))).toBe(true);
      // The next request re-sends a's items (the same objects) plus its own: cached and new bytes interleave.
      const next = { ...b, [key]: [...(a[key] as unknown[]), ...(b[key] as unknown[]), ...(a[key] as unknown[])] };
      expect(serializeRequest(next, key, cache).equals(Buffer.from(JSON.stringify(next)))).toBe(true);
      expect(serializeRequest(next, key, cache).equals(Buffer.from(JSON.stringify(next)))).toBe(true);
    },
  );

  it('serializes a request without the list, or with a list that is not an array, as JSON.stringify does', () => {
    const cache = new WeakMap<object, Buffer>();
    for (const r of [
      { model: 'm' },
      { model: 'm', messages: 'hi' },
      { messages: [undefined, () => 1, { a: undefined }] },
      { input: [1] },
      { messages: [{ t: 'é😀\ud800' }, 'x\udfff'] },
    ]) {
      expect(serializeRequest(r, 'messages', cache).equals(Buffer.from(JSON.stringify(r)))).toBe(true);
    }
  });
});
