/**
 * The request body sent upstream, serialized with each conversation item's JSON bytes reused: the
 * items of a conversation are the same objects request after request (the item memo and the
 * request stages' memos hand them back), so only new items are stringified and UTF-8 encoded; the
 * body is the cached bytes joined. Byte-identical to `Buffer.from(JSON.stringify(request))`: every
 * seam is an ASCII `[`, `,` or `]`, and JSON.stringify never leaves a lone surrogate to split.
 */
import { randomUUID } from 'node:crypto';

/** Item object → its JSON as UTF-8 bytes. Weak: an item nobody holds any more takes its bytes with it. */
export type ItemJsonCache = WeakMap<object, Buffer>;

// A placeholder no request can contain: the list is spliced in where it stands.
const PLACEHOLDER = `\u0000token-terminator-items-${randomUUID()}\u0000`;
const QUOTED = JSON.stringify(PLACEHOLDER);

const OPEN = Buffer.from('[');
const COMMA = Buffer.from(',');
const CLOSE = Buffer.from(']');

function itemBytes(item: unknown, cache: ItemJsonCache): Buffer {
  if (typeof item !== 'object' || item === null) return Buffer.from(JSON.stringify(item) ?? 'null');
  let bytes = cache.get(item);
  if (bytes === undefined) {
    // An array slot JSON.stringify cannot serialize (a function, undefined) is `null`.
    bytes = Buffer.from(JSON.stringify(item) ?? 'null');
    cache.set(item, bytes);
  }
  return bytes;
}

/** `Buffer.from(JSON.stringify(request))`, reusing the bytes of every item of `request[listKey]` seen before. */
export function serializeRequest(
  request: Readonly<Record<string, unknown>>,
  listKey: string,
  cache: ItemJsonCache,
): Buffer {
  const list = request[listKey];
  const whole = (): Buffer => Buffer.from(JSON.stringify(request) ?? 'null');
  if (!Array.isArray(list) || typeof (list as { toJSON?: unknown }).toJSON === 'function') return whole();
  const head = JSON.stringify({ ...request, [listKey]: PLACEHOLDER });
  const at = head.indexOf(QUOTED);
  if (at < 0) return whole();
  const parts: Buffer[] = [Buffer.from(head.slice(0, at)), OPEN];
  for (let i = 0; i < list.length; i++) {
    if (i > 0) parts.push(COMMA);
    parts.push(itemBytes(list[i], cache));
  }
  parts.push(CLOSE, Buffer.from(head.slice(at + QUOTED.length)));
  return Buffer.concat(parts);
}
