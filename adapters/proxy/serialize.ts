/**
 * The request body sent upstream, serialized with each conversation item's JSON reused: the
 * items of a conversation are the same objects request after request (the item memo and the
 * request stages' memos hand them back), so only new items are stringified. Byte-identical to
 * `JSON.stringify(request)`.
 */
import { randomUUID } from 'node:crypto';

/** Item object → its JSON text. Weak: an item nobody holds any more takes its text with it. */
export type ItemJsonCache = WeakMap<object, string>;

// A placeholder no request can contain: the list is spliced in where it stands.
const PLACEHOLDER = `\u0000token-terminator-items-${randomUUID()}\u0000`;
const QUOTED = JSON.stringify(PLACEHOLDER);

function itemJson(item: unknown, cache: ItemJsonCache): string {
  if (typeof item !== 'object' || item === null) return JSON.stringify(item) ?? 'null';
  let text = cache.get(item);
  if (text === undefined) {
    text = JSON.stringify(item) ?? 'null';
    cache.set(item, text);
  }
  return text;
}

/** `JSON.stringify(request)`, reusing the JSON of every item of `request[listKey]` seen before. */
export function serializeRequest(request: Readonly<Record<string, unknown>>, listKey: string, cache: ItemJsonCache): string {
  const list = request[listKey];
  if (!Array.isArray(list) || typeof (list as { toJSON?: unknown }).toJSON === 'function') return JSON.stringify(request);
  const head = JSON.stringify({ ...request, [listKey]: PLACEHOLDER });
  const at = head.indexOf(QUOTED);
  if (at < 0) return JSON.stringify(request);
  let items = '[';
  for (let i = 0; i < list.length; i++) items += (i === 0 ? '' : ',') + itemJson(list[i], cache);
  return `${head.slice(0, at)}${items}]${head.slice(at + QUOTED.length)}`;
}
