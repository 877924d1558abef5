import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BodyMemo, firstDifference } from '../../../adapters/proxy/body.js';
import { createDigests, NAMED_FROM } from '../../../src/ledger/digests.js';

type Obj = Record<string, unknown>;

const json = fc.jsonValue({ maxDepth: 3, stringUnit: 'binary' });
const item = fc.oneof(
  fc.record({ role: fc.constantFrom('user', 'assistant', 'tool'), content: fc.string({ unit: 'binary' }) }),
  json,
  // A tool output long enough to be named by its ledger digest.
  fc.record({ role: fc.constant('tool'), content: fc.string({ minLength: NAMED_FROM, maxLength: 300 }) }),
);
const key = fc.oneof(fc.constantFrom('model', 'stream', 'tools', 'max_tokens', '0', '7'), fc.string({ maxLength: 6 }));
const keys = fc.uniqueArray(fc.tuple(key, json), { maxLength: 3, selector: (kv) => kv[0] });
const indent = fc.constantFrom(undefined, 0, 1, 2, '\t');

/** A body as a client writes it: top-level keys around `messages`, any JSON indentation. */
function body(
  head: [string, unknown][],
  messages: unknown[],
  tail: [string, unknown][],
  space: string | number | undefined,
) {
  const value: Obj = {};
  for (const [k, v] of head) if (k !== 'messages' && k !== '__proto__') value[k] = v;
  value['messages'] = messages;
  for (const [k, v] of tail) if (k !== 'messages' && k !== '__proto__' && !(k in value)) value[k] = v;
  return Buffer.from(JSON.stringify(value, null, space));
}

const sessionOf = (v: Obj): string => `s:${JSON.stringify((v['messages'] as unknown[] | undefined)?.[0] ?? null)}`;
const digestOf = (sessionId: string, buf: Buffer): string =>
  createHash('sha256').update(sessionId).update(buf).digest('hex');

/** Same JSON text, same key order: what JSON.parse gives for the whole body. */
function expectWhole(got: Obj | undefined, buf: Buffer): void {
  expect(got).toBeDefined();
  expect(JSON.stringify(got)).toBe(JSON.stringify(JSON.parse(buf.toString('utf8'))));
  expect(Object.keys(got!)).toEqual(Object.keys(JSON.parse(buf.toString('utf8')) as Obj));
}

describe('BodyMemo', () => {
  it('parses every body of a growing conversation as JSON.parse does, reusing the earlier items as the same objects', () => {
    let reusedItems = 0;
    fc.assert(
      fc.property(
        keys,
        keys,
        fc.array(item, { minLength: 1, maxLength: 4 }),
        fc.array(
          fc.record({
            added: fc.array(item, { maxLength: 3 }),
            edit: fc.option(fc.tuple(fc.nat(), item), { freq: 4 }),
            tail: fc.option(keys, { freq: 3 }),
            space: indent,
          }),
          { minLength: 1, maxLength: 5 },
        ),
        indent,
        (head, tail0, first, turns, space0) => {
          const memo = new BodyMemo();
          // Named by the item ledger: a body extended from an earlier one has the digest it has parsed whole.
          const digests = createDigests();
          const named = new BodyMemo({ digests });
          let messages = first;
          let tail = tail0;
          // The latest body of each session: an edit of the first item moves the conversation to
          // another session (sessionOf), and the memo extends only a body of the same session.
          const latest = new Map<string, { items: unknown[]; buf: Buffer }>();
          let space = space0;
          for (const turn of [undefined, ...turns]) {
            if (turn !== undefined) {
              messages = [...messages, ...turn.added];
              if (turn.edit !== null) {
                const [at, value] = turn.edit;
                messages = messages.map((m, i) => (i === at % messages.length ? value : m));
              }
              if (turn.tail !== null) tail = turn.tail;
              space = turn.space;
            }
            const buf = body(head, messages, tail, space);
            const out = memo.parse(buf, 'messages', 'g', sessionOf);
            expectWhole(out?.value, buf);
            expect(out!.sessionId).toBe(sessionOf(out!.value));
            expect(out!.digest).toBe(digestOf(out!.sessionId, buf));
            const namedOut = named.parse(buf, 'messages', 'g', sessionOf);
            expect(namedOut!.reused).toBe(out!.reused);
            expect(namedOut!.digest).toBe(new BodyMemo({ digests }).parse(buf, 'messages', 'g', sessionOf)!.digest);
            const items = out!.value['messages'] as unknown[];
            reusedItems += out!.reused;
            const previous = latest.get(out!.sessionId);
            if (out!.reused > 0) expect(previous).toBeDefined();
            for (let i = 0; i < out!.reused; i++) expect(items[i]).toBe(previous!.items[i]);
            // Reused exactly the items whose bytes (and what came before them) were unchanged.
            if (previous !== undefined && out!.reused > 0)
              expect(firstDifference(buf, previous.buf)).toBeGreaterThan(0);
            latest.set(out!.sessionId, { items, buf });
          }
        },
      ),
      { numRuns: 300 },
    );
    expect(reusedItems).toBeGreaterThan(300); // the property exercised the reusing path
  });

  it('reuses a history that only grew, and nothing across sessions', () => {
    const memo = new BodyMemo();
    const base = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'fix it' },
    ];
    const a = memo.parse(body([['model', 'm']], base, [['stream', true]], undefined), 'messages', 'g', () => 'A')!;
    expect(a.reused).toBe(0);
    const grown = [...base, { role: 'assistant', content: 'ok' }];
    const b = memo.parse(body([['model', 'm']], grown, [['stream', true]], undefined), 'messages', 'g', () => 'A')!;
    expect(b.reused).toBe(2);
    expect((b.value['messages'] as unknown[])[1]).toBe((a.value['messages'] as unknown[])[1]);
    // The same bytes for another session: parsed whole, new objects.
    const c = memo.parse(body([['model', 'm']], grown, [['stream', true]], undefined), 'messages', 'g', () => 'B')!;
    expect(c.reused).toBe(0);
    expect((c.value['messages'] as unknown[])[1]).not.toBe((b.value['messages'] as unknown[])[1]);
    // Another group never sees this group's bodies.
    const d = memo.parse(body([['model', 'm']], grown, [['stream', true]], undefined), 'messages', 'h', () => 'A')!;
    expect(d.reused).toBe(0);
  });

  it('answers undefined exactly when JSON.parse fails or the body is not an object, also after a shared prefix', () => {
    const corruptions = fc.constantFrom(
      ',',
      ',}',
      ']',
      '\u00a0',
      'x',
      '',
      '}',
      ',"a":',
      '"',
      '\\',
      '\u0001',
      ' ',
      '\n',
    );
    fc.assert(
      fc.property(
        fc.array(item, { minLength: 1, maxLength: 3 }),
        fc.array(item, { maxLength: 2 }),
        corruptions,
        fc.nat(),
        fc.boolean(),
        (first, added, junk, at, cut) => {
          const memo = new BodyMemo();
          memo.parse(body([['model', 'm']], first, [['stream', true]], undefined), 'messages', 'g', () => 's');
          const good = body([['model', 'm']], [...first, ...added], [['stream', true]], undefined).toString('utf8');
          // Change the part after the earlier body's items (the shared prefix stays as it was).
          const from = JSON.stringify({ model: 'm', messages: first }).length - 2;
          const pos = from + (at % Math.max(1, good.length - from));
          const text = cut ? good.slice(0, pos) + junk : good.slice(0, pos) + junk + good.slice(pos);
          const buf = Buffer.from(text);
          let expected: unknown;
          try {
            expected = JSON.parse(text);
          } catch {
            expected = undefined;
          }
          const out = memo.parse(buf, 'messages', 'g', () => 's');
          if (typeof expected !== 'object' || expected === null || Array.isArray(expected)) expect(out).toBeUndefined();
          else expectWhole(out?.value, buf);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('parses whole, and keeps nothing, a body with a key given twice or a __proto__ key', () => {
    const memo = new BodyMemo();
    const twice = Buffer.from('{"model":"a","messages":[{"role":"user","content":"x"}],"model":"b"}');
    expectWhole(memo.parse(twice, 'messages', 'g', () => 's')?.value, twice);
    const again = Buffer.from('{"model":"a","messages":[{"role":"user","content":"x"},1],"model":"b"}');
    const out = memo.parse(again, 'messages', 'g', () => 's');
    expectWhole(out?.value, again);
    expect(out!.reused).toBe(0);
    const proto = Buffer.from('{"__proto__":{"polluted":1},"messages":[1]}');
    const p = memo.parse(proto, 'messages', 'g', () => 's')!;
    expect(Object.hasOwn(p.value, '__proto__')).toBe(true);
    expect(({} as Obj)['polluted']).toBeUndefined();
    const protoTail = Buffer.from('{"messages":[1,2],"__proto__":{"polluted":1}}');
    memo.parse(Buffer.from('{"messages":[1]}'), 'messages', 'g', () => 's');
    const q = memo.parse(protoTail, 'messages', 'g', () => 's')!;
    expectWhole(q.value, protoTail);
    expect(Object.getPrototypeOf(q.value)).toBe(Object.prototype);
  });

  it('counts a remembered body at twice its bytes (its bytes and its parse), keeping the most recent groups that fit', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 2000 }), { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 0, max: 30_000 }),
        (lengths, extra) => {
          const bodies = lengths.map((n, i) => body([], [{ role: 'tool', content: 'x'.repeat(n) }, i], [], undefined));
          const maxBytes = 2 * Math.max(...bodies.map((b) => b.length)) + extra;
          const memo = new BodyMemo({ maxBytes });
          bodies.forEach((b, i) => memo.parse(b, 'messages', `g${i}`, () => `s${i}`));
          // The newest groups whose bodies, at twice their bytes, fit in maxBytes together.
          const kept = new Set<number>();
          let held = 0;
          for (let i = bodies.length - 1; i >= 0 && held + 2 * bodies[i]!.length <= maxBytes; i--) {
            held += 2 * bodies[i]!.length;
            kept.add(i);
          }
          // The same bytes again reuse the remembered items exactly when the group's body was kept.
          // Newest first: a kept body asked again holds as much as before, and a body not kept is
          // remembered once asked, evicting only groups older than it, asked already.
          for (let i = bodies.length - 1; i >= 0; i--)
            expect(memo.parse(bodies[i]!, 'messages', `g${i}`, () => `s${i}`)!.reused > 0).toBe(kept.has(i));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('finds the first differing byte across block boundaries', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 200_000 }), fc.integer({ min: 0, max: 300_000 }), (n, at) => {
        const a = Buffer.alloc(n, 7);
        const b = Buffer.from(a);
        if (at < n) b[at] = 8;
        expect(firstDifference(a, b)).toBe(at < n ? at : n);
      }),
      { numRuns: 50 },
    );
  });
});
