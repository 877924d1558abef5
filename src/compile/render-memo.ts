/**
 * Sticky renderings: a rendered item is built once per (input item, decision signature) and the
 * same output object is returned on every later request. Equal inputs and decisions therefore
 * give byte-identical outputs, and the meter's identity memo hits on them (no re-serialization).
 */
export interface RenderMemo {
  /** The memoized rendering of `item` under `signature`, built by `build` on first use. */
  render<T>(item: object, signature: string, build: () => T): T;
}

/** One memo per session (per subscription). Entries die with their input items (WeakMap). */
export function createRenderMemo(): RenderMemo {
  const memo = new WeakMap<object, { signature: string; out: unknown }>();
  return {
    render<T>(item: object, signature: string, build: () => T): T {
      const hit = memo.get(item);
      if (hit !== undefined && hit.signature === signature) return hit.out as T;
      const out = build();
      memo.set(item, { signature, out });
      return out;
    },
  };
}
