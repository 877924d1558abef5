/**
 * Deterministic PRNG (mulberry32): one 32-bit seed always gives the same sequence of floats in
 * [0, 1). Shared by the testing kit (seeded text) and the eval harness (tasks and arm order), so a
 * recorded seed reproduces either.
 */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
