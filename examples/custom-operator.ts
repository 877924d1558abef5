/**
 * A worked custom operator: replace the output of a noisy tool above a size with a one-line
 * receipt, keeping the exact output in the vault. It shows the four things every operator needs:
 *
 * - the Step contract: return a new Step built with `advance` (never mutate `step.value`);
 * - fail-open: anything that throws inside the reducer passes the Step through unchanged with a
 *   `failed_open` decision (stepOperator does this for us);
 * - teardown: the vault write races a deadline timer, and the timer is cleared when the write
 *   settles or when the subscriber unsubscribes (the reducer's signal aborts);
 * - per-subscription state: the memo of already-vaulted outputs lives inside `init`, so two
 *   subscriptions never share it.
 *
 * It imports the package by name, as your project would.
 */
import type { OperatorFunction } from 'rxjs';
import {
  codePoints,
  stepOperator,
  createReceipt,
  isReceipt,
  renderReceipt,
  advance,
  type Step,
  type ToolResult,
  type Vault,
} from 'token-terminator';

/** Timer functions, injectable so tests can track them. */
export interface Timers {
  setTimeout(callback: () => void, ms: number): NodeJS.Timeout;
  clearTimeout(handle: NodeJS.Timeout | undefined): void;
}

export interface DropNoisyOutputOptions {
  /** Host tool names whose large outputs are replaced. Required, at least one. */
  readonly tools: readonly string[];
  /** The vault that keeps the exact output. Required. */
  readonly vault: Vault;
  /** Outputs longer than this many code points are replaced. Default: 4,000 (minimum 200, so a receipt is always shorter). */
  readonly maxChars?: number;
  /** Longest wait for the vault write before the output passes through unchanged. Default: 2,000 ms. */
  readonly timeoutMs?: number;
  /** Timer functions. Default: the global `setTimeout` / `clearTimeout`. */
  readonly timers?: Timers;
}

const STAGE = 'dropNoisyOutput';

/**
 * Replace large outputs of noisy tools with a receipt; the exact output stays recoverable with
 * `token_terminator action=artifact_get`.
 *
 * @example
 * results$.pipe(dropNoisyOutput({ tools: ['noisy_probe'], vault, maxChars: 2_000 }))
 */
export function dropNoisyOutput(options: DropNoisyOutputOptions): OperatorFunction<Step<ToolResult>, Step<ToolResult>> {
  const maxChars = options.maxChars ?? 4_000;
  const timeoutMs = options.timeoutMs ?? 2_000;
  // Options are checked when the operator is built, with the operator's name in the message.
  if (options.tools.length === 0) throw new RangeError(`${STAGE}: tools must name at least one tool`);
  if (!Number.isInteger(maxChars) || maxChars < 200)
    throw new RangeError(`${STAGE}: maxChars must be an integer ≥ 200, got ${maxChars}`);
  if (!(timeoutMs > 0)) throw new RangeError(`${STAGE}: timeoutMs must be > 0, got ${timeoutMs}`);
  const tools = new Set(options.tools);
  const timers: Timers = options.timers ?? {
    setTimeout: (cb, ms) => setTimeout(cb, ms),
    clearTimeout: (h) => clearTimeout(h),
  };

  return stepOperator<ToolResult>(STAGE, () => {
    // Per-subscription state: output → artifact already written and verified in this run.
    const vaulted = new Map<string, { readonly artifactId: string; readonly sha256: string }>();
    return async (step, signal) => {
      const result = step.value;
      if (!tools.has(result.name) || isReceipt(result.content)) return undefined;
      const chars = codePoints(result.content);
      if (chars <= maxChars) return undefined;
      let stored = vaulted.get(result.content);
      if (stored === undefined) {
        stored = await withDeadline(
          options.vault.put({
            content: result.content,
            toolName: result.name,
            args: result.args,
            sessionId: step.context.sessionId,
            callId: result.callId,
          }),
          timeoutMs,
          signal,
          timers,
        );
        vaulted.set(result.content, stored);
      }
      const { artifactId } = stored;
      const receipt = renderReceipt(createReceipt(artifactId, result.name, chars, stored.sha256));
      if (codePoints(receipt) >= chars) return undefined;
      // A new value object; the caller's `result` is left as it was.
      return advance(
        step,
        { ...result, content: receipt },
        {
          stage: STAGE,
          kind: 'applied',
          reason: 'noisy output vaulted',
          savedChars: chars - codePoints(receipt),
          artifacts: [artifactId],
        },
      );
    };
  });
}

/** Race a promise against a deadline; the timer never outlives the race or the subscription. */
function withDeadline<V>(work: Promise<V>, ms: number, signal: AbortSignal, timers: Timers): Promise<V> {
  return new Promise<V>((resolve, reject) => {
    // Assigned once below; the cleanup closures only run after that.
    // eslint-disable-next-line prefer-const
    let handle: NodeJS.Timeout | undefined;
    const cleanup = (): void => {
      timers.clearTimeout(handle);
      signal.removeEventListener('abort', onAbort);
    };
    const onAbort = (): void => {
      cleanup();
      reject(new Error('aborted'));
    };
    handle = timers.setTimeout(() => {
      cleanup();
      reject(new Error(`vault write exceeded ${ms} ms`));
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (v) => {
        cleanup();
        resolve(v);
      },
      (e: unknown) => {
        cleanup();
        reject(e);
      },
    );
  });
}
