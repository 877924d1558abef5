/** A Proxy that answers one property differently and forwards everything else to the target. */
export function override<T extends object, K extends PropertyKey>(target: T, key: K, value: unknown): T {
  return new Proxy(target, {
    get(obj, prop, receiver) {
      if (prop === key) return value;
      const v: unknown = Reflect.get(obj, prop, receiver);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(obj) : v;
    },
  });
}
