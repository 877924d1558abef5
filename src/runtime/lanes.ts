/**
 * Lanes: one long-lived subscription per (pipeline, session) that every call of that session is
 * pushed through, so the operators' per-subscription state (memos, sticky renderings, the rewrite
 * cache) survives between calls. Kept for the most recently used sessions only, bounded by count
 * and by the bytes their state is estimated at (a request lane: from its session's latest request,
 * which its memos hold and derive from); an evicted lane finishes its queued calls, then closes.
 * Nothing of it is needed again: a later call of the session starts a new lane, which rebuilds its
 * memos from the request and the vault.
 */
import { LRUCache } from 'lru-cache';
import { Subject, type OperatorFunction, type Subscription } from 'rxjs';
import { failOpen, note, type Step } from '../step.js';

/** A pipeline stage over Steps of T. */
export type Op<T> = OperatorFunction<Step<T>, Step<T>>;

export type LaneKind = 'tool_call' | 'tool_result' | 'request';

export class LaneCache {
  readonly #lanes: LRUCache<string, Lane<never>>;
  /** Accounted bytes per lane key (absent: not sized yet, counted as 0). */
  readonly #bytes = new Map<string, number>();
  /** State kept beside a lane by its host ({@link LaneCache.memo}), dropped with the lane. */
  readonly #memos = new Map<string, unknown>();
  readonly #maxBytes: number;
  #total = 0;

  /**
   * @param max - sessions kept (three lanes each: tool calls, tool results, requests).
   * @param maxBytes - estimated bytes of state over all lanes ({@link LaneCache.account}); the
   *   least recently used lanes go first, the one just sized stays. Default unbounded.
   */
  constructor(max: number, maxBytes = Number.POSITIVE_INFINITY) {
    this.#maxBytes = maxBytes;
    this.#lanes = new LRUCache({
      max: Math.floor(Math.max(1, max) * 3),
      // After the new lane is in: the least recently used one finishes its queued calls, then closes.
      disposeAfter: (lane, key, reason) => {
        this.#forget(key);
        this.#memos.delete(key);
        if (reason === 'evict' || reason === 'delete') lane.drain();
      },
    });
  }

  /** Bytes of state accounted over all lanes now (never above the bound but for the newest lane alone). */
  get bytes(): number {
    return this.#total;
  }

  /** Lanes held now. */
  get size(): number {
    return this.#lanes.size;
  }

  /** Sessions with at least one lane held now. */
  get sessions(): number {
    const ids = new Set<string>();
    for (const key of this.#lanes.keys()) ids.add(key.slice(key.indexOf('\u0000') + 1));
    return ids.size;
  }

  /**
   * Account a lane's state at `bytes` (it replaces the lane's earlier figure), then drop least
   * recently used lanes until the total is within the bound; this lane stays even alone above it.
   */
  account(kind: LaneKind, sessionId: string, bytes: number): void {
    const key = `${kind}\u0000${sessionId}`;
    if (!this.#lanes.has(key)) return;
    this.#forget(key);
    this.#bytes.set(key, bytes);
    this.#total += bytes;
    while (this.#total > this.#maxBytes) {
      const oldest = this.#lanes.rkeys().next().value;
      if (oldest === undefined || oldest === key) break;
      this.#lanes.delete(oldest);
    }
  }

  /**
   * The state a host keeps beside a lane (e.g. what it accounts the lane at, carried from call to
   * call), made by `make` on first use and dropped with the lane; undefined when there is no such lane.
   */
  memo<M>(kind: LaneKind, sessionId: string, make: () => M): M | undefined {
    const key = `${kind}\u0000${sessionId}`;
    if (!this.#lanes.has(key)) return undefined;
    let memo = this.#memos.get(key) as M | undefined;
    if (memo === undefined) this.#memos.set(key, (memo = make()));
    return memo;
  }

  #forget(key: string): void {
    const had = this.#bytes.get(key);
    if (had === undefined) return;
    this.#total -= had;
    this.#bytes.delete(key);
  }

  get<T>(kind: LaneKind, sessionId: string, operator: () => Op<T>): Lane<T> {
    const key = `${kind}\u0000${sessionId}`;
    const found = this.#lanes.get(key) as Lane<T> | undefined;
    if (found !== undefined) return found;
    const lane = new Lane<T>(`runtime:${kind}`, operator);
    this.#lanes.set(key, lane as unknown as Lane<never>);
    return lane;
  }

  /** Drop every lane of a session (its host ended it). */
  end(sessionId: string): void {
    for (const kind of ['tool_call', 'tool_result', 'request'] as const) {
      const key = `${kind}\u0000${sessionId}`;
      this.#lanes.get(key)?.drain();
      this.#lanes.delete(key);
    }
  }

  closeAll(): void {
    for (const lane of this.#lanes.rvalues()) lane?.close(); // oldest first
    this.#lanes.clear();
    this.#memos.clear();
  }
}

interface Pending<T> {
  readonly input: Step<T>;
  resolve(step: Step<T>): void;
}

/**
 * Pushes Steps into one subscription of an operator chain and resolves each call with its output.
 * Operators built with `stepOperator` emit exactly one output per input, in order, so outputs pair
 * with calls FIFO. An aborted call resolves at once with its input (the stage sees the abort
 * through the Step's signal); its later output is dropped. If the chain errors or completes,
 * pending calls fail open and the next call subscribes afresh.
 */
export class Lane<T> {
  readonly #stage: string;
  readonly #operator: () => Op<T>;
  #subject: Subject<Step<T>> | undefined;
  #subscription: Subscription | undefined;
  readonly #queue: Pending<T>[] = [];
  #closed = false;
  #draining = false;

  constructor(stage: string, operator: () => Op<T>) {
    this.#stage = stage;
    this.#operator = operator;
  }

  /** Run one Step; never rejects. */
  run(step: Step<T>): Promise<Step<T>> {
    if (this.#closed || this.#draining)
      return Promise.resolve(note(step, { stage: this.#stage, kind: 'skipped', reason: 'runtime closed' }));
    if (step.signal?.aborted)
      return Promise.resolve(note(step, { stage: this.#stage, kind: 'skipped', reason: 'aborted' }));
    return new Promise<Step<T>>((resolve) => {
      let settled = false;
      const signal = step.signal;
      const onAbort = (): void => settle(note(step, { stage: this.#stage, kind: 'skipped', reason: 'aborted' }));
      const settle = (out: Step<T>): void => {
        if (settled) return;
        settled = true;
        signal?.removeEventListener('abort', onAbort);
        resolve(out);
        if (this.#draining && this.#queue.length === 0) this.close();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#queue.push({ input: step, resolve: settle });
      try {
        this.#ensure().next(step);
      } catch (error) {
        this.#fail(error);
      }
    });
  }

  /** Stop taking calls; close once the queued ones are answered (LRU eviction). */
  drain(): void {
    this.#draining = true;
    if (this.#queue.length === 0) this.close();
  }

  /** Unsubscribe (cancels in-flight work); queued calls resolve with their input. */
  close(): void {
    this.#closed = true;
    const sub = this.#subscription;
    this.#subscription = undefined;
    this.#subject = undefined;
    sub?.unsubscribe();
    for (const p of this.#queue.splice(0))
      p.resolve(note(p.input, { stage: this.#stage, kind: 'skipped', reason: 'runtime closed' }));
  }

  #ensure(): Subject<Step<T>> {
    if (this.#subject !== undefined) return this.#subject;
    const subject = new Subject<Step<T>>();
    this.#subject = subject;
    this.#subscription = subject.pipe(this.#operator()).subscribe({
      next: (out) => this.#queue.shift()?.resolve(out),
      error: (error: unknown) => this.#fail(error),
      complete: () => this.#fail(new Error('pipeline completed')),
    });
    return subject;
  }

  #fail(error: unknown): void {
    const sub = this.#subscription;
    this.#subscription = undefined;
    this.#subject = undefined;
    sub?.unsubscribe();
    for (const p of this.#queue.splice(0)) p.resolve(failOpen(p.input, this.#stage, error));
  }
}
