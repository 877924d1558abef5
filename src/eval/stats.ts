/**
 * The harness's statistics, for paired binary outcomes (each pair: off correct?, balanced correct?).
 * b = pairs where only off is correct (harm), c = pairs where only balanced is correct, n = pairs.
 *
 * - Harm: exact one-sided McNemar test on the b + c discordant pairs: under "no difference" each
 *   discordant pair is equally likely to go either way, so p = P(X ≥ b), X ~ Binomial(b + c, 1/2).
 * - Non-inferiority with margin δ on the accuracy difference Δ = p_off − p_balanced:
 *   H0: Δ ≥ δ against H1: Δ < δ. Statistic: Tango's score statistic (Tango 1998), which uses the
 *   restricted maximum-likelihood estimate of the discordance under H0. p-value: exact
 *   unconditional — the probability, maximized over the nuisance parameter, of a statistic at
 *   least as small as observed under the trinomial model of (b, c, n − b − c) on the H0 boundary.
 *   This keeps the size at or below α for small n, where the normal approximation is not trusted.
 */

/** Exact one-sided McNemar p-value for harm: P(X ≥ b), X ~ Binomial(b + c, 1/2); 1 when b + c = 0. */
export function mcnemarHarmP(b: number, c: number): number {
  const m = b + c;
  if (m === 0) return 1;
  let p = 0;
  for (let x = b; x <= m; x++) p += Math.exp(logChoose(m, x) - m * Math.LN2);
  return Math.min(1, p);
}

/**
 * Tango's score statistic for H0: Δ = δ (Δ = p10 − p01, here p_off − p_balanced):
 * Z = (b − c − nδ) / sqrt(n (2 q̃ + δ (1 − δ))), q̃ the restricted MLE of p01 under H0.
 * Negative values favour non-inferiority.
 */
export function tangoZ(b: number, c: number, n: number, delta: number): number {
  const q = restrictedP01(b, c, n, delta);
  const v = n * (2 * q + delta * (1 - delta));
  return v <= 0 ? 0 : (b - c - n * delta) / Math.sqrt(v);
}

/** Root of 2n q² + (−(b + c) + δ(2n − b + c)) q − cδ(1 − δ) = 0 in [0, (1 − δ) / 2]. */
function restrictedP01(b: number, c: number, n: number, delta: number): number {
  const A = 2 * n;
  const B = -(b + c) + delta * (2 * n - b + c);
  const C = -c * delta * (1 - delta);
  const q = (-B + Math.sqrt(Math.max(0, B * B - 4 * A * C))) / (2 * A);
  return Math.min(Math.max(q, 0), (1 - delta) / 2);
}

/**
 * Exact unconditional one-sided p-value for non-inferiority (H0: Δ ≥ δ): sup over the nuisance
 * p01 ∈ [0, (1 − δ)/2] of P(Z(B, C) ≤ Z(b, c)) with (B, C, rest) ~ Multinomial(n; p01 + δ, p01, ·).
 * The supremum is taken on a grid of `grid` points refined around its maximum.
 */
export function exactNonInferiorityP(b: number, c: number, n: number, delta: number, grid = 200): number {
  if (!(delta > 0 && delta < 1)) throw new RangeError('exactNonInferiorityP: delta must be within (0, 1)');
  if (n <= 0) return 1;
  const observed = tangoZ(b, c, n, delta) + 1e-12;
  const lf = logFactorials(n);
  const region: [number, number][] = [];
  for (let x = 0; x <= n; x++)
    for (let y = 0; x + y <= n; y++) if (tangoZ(x, y, n, delta) <= observed) region.push([x, y]);
  const prob = (q: number): number => {
    const p10 = q + delta;
    const rest = 1 - p10 - q;
    let s = 0;
    for (const [x, y] of region) {
      const r = n - x - y;
      if ((y > 0 && q <= 0) || (r > 0 && rest <= 0)) continue;
      s += Math.exp(
        lf[n]! -
          lf[x]! -
          lf[y]! -
          lf[r]! +
          x * Math.log(p10) +
          (y === 0 ? 0 : y * Math.log(q)) +
          (r === 0 ? 0 : r * Math.log(rest)),
      );
    }
    return s;
  };
  const hi = (1 - delta) / 2;
  let best = 0;
  let bestQ = 0;
  for (let i = 0; i <= grid; i++) {
    const q = (hi * i) / grid;
    const p = prob(q);
    if (p > best) [best, bestQ] = [p, q];
  }
  // Refine around the best grid point (the function is smooth in q).
  const step = hi / grid;
  for (let i = -20; i <= 20; i++) {
    const q = Math.min(hi, Math.max(0, bestQ + (step * i) / 20));
    best = Math.max(best, prob(q));
  }
  return Math.min(1, best);
}

function logFactorials(n: number): number[] {
  const out = [0];
  for (let i = 1; i <= n; i++) out.push(out[i - 1]! + Math.log(i));
  return out;
}

function logChoose(m: number, k: number): number {
  const lf = logFactorials(m);
  return lf[m]! - lf[k]! - lf[m - k]!;
}
