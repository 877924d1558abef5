import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { serializeRequest } from '../../../adapters/proxy/serialize.js';

const item = fc.oneof(fc.dictionary(fc.string(), fc.jsonValue()), fc.jsonValue());
const request = (key: string) => fc.record({ before: fc.dictionary(fc.string(), fc.jsonValue()), items: fc.array(item), after: fc.dictionary(fc.string(), fc.jsonValue()) }).map(({ before, items, after }) => ({ ...before, [key]: items, ...after }));

describe('serializeRequest', () => {
  test.prop([fc.constantFrom('messages', 'input').chain((key) => fc.tuple(fc.constant(key), request(key), request(key)))])(
    'is byte-identical to JSON.stringify, for new items and for items seen before (shared between requests)',
    ([key, a, b]) => {
      const cache = new WeakMap<object, string>();
      expect(serializeRequest(a, key, cache)).toBe(JSON.stringify(a));
      // The next request re-sends a's items (the same objects) plus its own: cached and new text interleave.
      const next = { ...b, [key]: [...(a[key] as unknown[]), ...(b[key] as unknown[]), ...(a[key] as unknown[])] };
      expect(serializeRequest(next, key, cache)).toBe(JSON.stringify(next));
      expect(serializeRequest(next, key, cache)).toBe(JSON.stringify(next));
    },
  );

  it('serializes a request without the list, or with a list that is not an array, as JSON.stringify does', () => {
    const cache = new WeakMap<object, string>();
    for (const r of [{ model: 'm' }, { model: 'm', messages: 'hi' }, { messages: [undefined, () => 1, { a: undefined }] }, { input: [1] }]) {
      expect(serializeRequest(r, 'messages', cache)).toBe(JSON.stringify(r));
    }
  });
});
