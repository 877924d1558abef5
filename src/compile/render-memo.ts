/**
 * Sticky renderings: a rendered item is built once per (input item, slot changes) and the same
 * output object is returned on every later request. Equal inputs and decisions therefore give
 * byte-identical outputs, and the meter's identity memo hits on them (no re-serialization).
 */
import type { SlotPath } from '../model/types.js';
import { WeakMemo } from '../weak-memo.js';

/** One slot change inside an item: the path below the item and the text written there. */
export interface ItemChange {
  readonly path: SlotPath;
  readonly value: string;
}

export interface RenderMemo {
  /** The memoized rendering of `item` with `changes` written in, built by `build` on first use. */
  render<T>(item: object, changes: readonly ItemChange[], build: () => T): T;
}

/** Same paths and the same texts, in the same order (texts compare by content; the same string is a pointer check). */
function sameChanges(a: readonly ItemChange[], b: readonly ItemChange[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x.value !== y.value || x.path.length !== y.path.length) return false;
    for (let k = 0; k < x.path.length; k++) if (x.path[k] !== y.path[k]) return false;
  }
  return true;
}

/** One memo per session (per subscription). Entries die with their input items (WeakMap). */
export function createRenderMemo(): RenderMemo {
  const memo = new WeakMemo<object, { changes: readonly ItemChange[]; out: unknown }>();
  return {
    render<T>(item: object, changes: readonly ItemChange[], build: () => T): T {
      const hit = memo.get(item);
      if (hit !== undefined && sameChanges(hit.changes, changes)) return hit.out as T;
      const out = build();
      memo.set(item, { changes, out });
      return out;
    },
  };
}
