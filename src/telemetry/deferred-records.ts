/**
 * The facade's per-request telemetry (the metrics row, the experiment ledger's turn), recorded
 * after `reduceRequest` has answered. Measuring both sides of a request and the two stores' commits
 * were about a quarter of a request's own time, for figures no caller waits for: they now run one
 * turn of the event loop later (while the host's provider call is in flight), in call order.
 *
 * What is recorded is a snapshot taken when the call answers: hosts append to their messages
 * array right after a call, and the deferred measurement must see the request as it was sent.
 */
import type { ProviderRequest, Step } from '../step.js';

/** A request's shape copied far enough that later changes to the caller's arrays do not reach it. */
function copyRequest(request: ProviderRequest): ProviderRequest {
  const out: Record<string, unknown> = { ...request };
  for (const key of ['messages', 'input'] as const) {
    const list = out[key];
    if (Array.isArray(list)) out[key] = [...list];
  }
  return out as ProviderRequest;
}

/**
 * The Step as the deferred record reads it: the caller's request and the final one as they were
 * when the call answered, the context without its lock budget (that budget belonged to the call;
 * a deferred write waits with its own).
 */
export function recordedStep(step: Step<ProviderRequest>): Step<ProviderRequest> {
  const { lockBudget: _spent, ...context } = step.context;
  const original = copyRequest(step.original);
  return {
    original,
    value: step.value === step.original ? original : copyRequest(step.value),
    context,
    decisions: step.decisions,
  };
}

/**
 * A FIFO of answered requests whose telemetry is still to be recorded. One batch at a time, in
 * the order the calls answered, so each session's turns reach the ledger in its call order. The
 * run function owns failures; whatever it throws is dropped here, never reaching a caller.
 */
export class DeferredRecords {
  readonly #run: (batch: readonly Step<ProviderRequest>[]) => Promise<void>;
  #queue: Step<ProviderRequest>[] = [];
  #immediate: NodeJS.Immediate | undefined;
  #running: Promise<void> | undefined;

  constructor(run: (batch: readonly Step<ProviderRequest>[]) => Promise<void>) {
    this.#run = run;
  }

  /** Queue one answered request (snapshotted now); its record runs on a later turn of the event loop. */
  add(step: Step<ProviderRequest>): void {
    this.#queue.push(recordedStep(step));
    this.#schedule();
  }

  /** Resolves once every request added so far is recorded (or its record failed). Never rejects. */
  async settled(): Promise<void> {
    while (this.#queue.length > 0 || this.#running !== undefined) await this.#kick();
  }

  #schedule(): void {
    if (this.#immediate === undefined && this.#running === undefined)
      this.#immediate = setImmediate(() => void this.#kick());
  }

  #kick(): Promise<void> {
    if (this.#immediate !== undefined) clearImmediate(this.#immediate);
    this.#immediate = undefined;
    this.#running ??= this.#drain().finally(() => {
      this.#running = undefined;
      // Added after the drain's last look at the queue, before this callback: not left behind.
      if (this.#queue.length > 0) this.#schedule();
    });
    return this.#running;
  }

  async #drain(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue.splice(0);
      try {
        await this.#run(batch);
      } catch {
        // Telemetry is diagnostics: a failure never reaches a call, and the next batch still runs.
      }
    }
  }
}
