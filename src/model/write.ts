/**
 * Write changed slot values back into the request's own shape with structural sharing: only the
 * objects and arrays on the path to a change are copied (shallowly); everything else, the
 * caller's objects included, is shared and never mutated.
 */
import type { SlotChange, SlotPath } from './types.js';

interface Node {
  value?: unknown;
  set: boolean;
  readonly children: Map<string | number, Node>;
}

const newNode = (): Node => ({ set: false, children: new Map() });

/**
 * Apply changes to a request; returns the request itself when `changes` is empty.
 * Paths that run through something that is not an object/array are ignored (unknown shapes pass).
 *
 * @example
 * const view = readRequest(req);
 * const out = writeSlots(req, [{ path: view.slots[3]!.path, value: 'receipt' }]);
 */
export function writeSlots<T>(request: T, changes: readonly SlotChange[]): T {
  if (changes.length === 0) return request;
  const root = newNode();
  for (const change of changes) {
    let node = root;
    for (const key of change.path) {
      let child = node.children.get(key);
      if (child === undefined) node.children.set(key, (child = newNode()));
      node = child;
    }
    node.value = change.value;
    node.set = true;
  }
  return apply(request, root) as T;
}

function apply(current: unknown, node: Node): unknown {
  if (node.set) return node.value;
  if (node.children.size === 0 || typeof current !== 'object' || current === null) return current;
  const array = Array.isArray(current);
  const obj = current as Record<string | number, unknown>;
  let copy: Record<string | number, unknown> | undefined;
  for (const [key, child] of node.children) {
    if (array ? typeof key !== 'number' || key < 0 || key >= current.length : typeof key !== 'string') continue;
    const next = apply(obj[key], child);
    if (next === obj[key]) continue;
    copy ??= array ? (current.slice() as Record<number, unknown>) : { ...obj };
    copy[key] = next;
  }
  return copy ?? current;
}

/**
 * The value at a path (undefined when the path does not exist).
 *
 * @example
 * valueAt({ messages: [{ content: 'hi' }] }, ['messages', 0, 'content']); // 'hi'
 */
export function valueAt(root: unknown, path: SlotPath): unknown {
  let cur = root;
  for (const key of path) {
    if (typeof cur !== 'object' || cur === null) return undefined;
    cur = (cur as Record<string | number, unknown>)[key];
  }
  return cur;
}

/**
 * A copy of the request with its conversation list replaced (the new list is used as given).
 *
 * @example
 * const request = { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] };
 * const shorter = withItems(request, 'messages', []); // request itself is unchanged
 */
export function withItems<T>(request: T, listKey: 'messages' | 'input', items: readonly unknown[]): T {
  return { ...(request as Record<string, unknown>), [listKey]: items } as T;
}
