import type { ProviderRequest, Step } from '../../step.js';
import { promptSegments } from '../format.js';
import { checkedRun, type InvariantOptions, InvariantViolation, type OperatorUnderTest, stagesOf } from '../harness.js';

/** Options of the cache-stable invariant. */
export interface CacheStableOptions extends InvariantOptions<ProviderRequest> {
  /**
   * Where the operator may rewrite an earlier part of the prompt (a declared batching boundary).
   * Receives the previous and the next output Step and the next one's index.
   *
   * @defaultValue never
   */
  readonly isBoundary?: (previous: Step<ProviderRequest>, next: Step<ProviderRequest>, index: number) => boolean;
}

/**
 * The first prompt segment of `prev` that `next` does not repeat; undefined when `prev` is a prefix of `next`.
 *
 * @example
 * import { prefixBreak } from 'token-terminator/testing';
 * const first = { system: 'Be brief.', messages: [{ role: 'user', content: 'hi' }] };
 * prefixBreak(first, { ...first, messages: [...first.messages, { role: 'assistant', content: 'hello' }] }); // undefined
 */
export function prefixBreak(
  prev: ProviderRequest,
  next: ProviderRequest,
): { index: number; label: string; before: string; after: string } | undefined {
  const a = promptSegments(prev);
  const b = promptSegments(next);
  for (let i = 0; i < a.length; i++) {
    if (b[i]?.text !== a[i]!.text)
      return { index: i, label: a[i]!.label, before: a[i]!.text, after: b[i]?.text ?? '(missing)' };
  }
  return undefined;
}

/**
 * A boundary predicate for `isBoundary`: wherever the `applied` decisions of the given stages
 * (default: all) differ between two outputs (stage, reason, artifacts, saved chars/tokens), an
 * operator replaced more or other content. Between such points the rendering must stay
 * byte-stable, so a prefix rewrite that reports the same decision is caught.
 *
 * @example
 * testInvariants(test, op, { vault, only: ['cache-stable'], isBoundary: decisionsChanged(['compileRequest']) });
 */
export function decisionsChanged(stages?: readonly string[]): NonNullable<CacheStableOptions['isBoundary']> {
  const key = (step: Step<ProviderRequest>): string =>
    JSON.stringify(
      step.decisions
        .filter((d) => d.kind === 'applied' && (stages === undefined || stages.includes(d.stage)))
        .map((d) => [d.stage, d.reason, [...(d.artifacts ?? [])].sort(), d.savedChars ?? null, d.savedTokens ?? null]),
    );
  return (previous, next) => key(previous) !== key(next);
}

const clip = (s: string): string => (s.length > 120 ? `${s.slice(0, 117)}…` : s);

/**
 * Cache-stable renderings over a growing session: the requests are pushed through one
 * subscription (one session); wherever the input N+1 extends input N, the compiled N+1 must start
 * with the compiled N (tools, instructions and each conversation item serialized), except where
 * `isBoundary` says a boundary was declared.
 */
export function cacheStablePredicate(
  op: OperatorUnderTest<ProviderRequest>,
  options: CacheStableOptions,
): (values: readonly ProviderRequest[]) => Promise<void> {
  return (values) =>
    checkedRun('cache-stable', op, options, values, (steps, result) => {
      for (let i = 1; i < steps.length; i++) {
        if (prefixBreak(steps[i - 1]!.value, steps[i]!.value) !== undefined) continue; // the caller's own requests do not grow here
        const prev = result.outputs[i - 1]!;
        const next = result.outputs[i]!;
        const broken = prefixBreak(prev.value, next.value);
        if (broken === undefined || options.isBoundary?.(prev, next, i) === true) continue;
        throw new InvariantViolation(
          'cache-stable',
          `request ${i} of ${steps.length} (${stagesOf(next)})`,
          `the compiled request does not start with compiled request ${i - 1}: ${broken.label} was ${clip(broken.before)} and became ${clip(broken.after)}`,
        );
      }
    });
}
