/**
 * A FIFO of work items run in batches after the caller has moved on: one batch at a time, in the
 * order they were added, so records of one session keep their order. The run function owns
 * failures; whatever it throws is dropped here (the next batch still runs) and never reaches the
 * code that added the item. Used by the facade's deferred request telemetry, the proxy's accounting
 * and the count store's writes (src/ledger/stored-counts.ts), which differ only in when a batch starts.
 */
export interface BatchQueueOptions<T = unknown> {
  /**
   * How long an added item waits for others before its batch starts, in ms (an unref'd timer);
   * undefined: the next turn of the event loop.
   */
  readonly delayMs?: number;
  /** Most items per batch; a queue this long starts its batch at once. Default: no bound. */
  readonly maxBatch?: number;
  /**
   * Most items waiting (queued, or in the batch that is running) before {@link BatchQueue.room}
   * makes adders wait: the bound on what a queue that falls behind can hold. Default: no bound.
   */
  readonly maxPending?: number;
  /** What one item weighs (e.g. the bytes of the bodies it holds), for {@link maxPendingWeight}. Default: nothing. */
  readonly weigh?: (item: T) => number;
  /**
   * Most weight waiting before {@link BatchQueue.room} makes adders wait, beside `maxPending`: the
   * bound when items differ in size. Waiting adders are let go once the weight is under it again,
   * as many as `maxPending` leaves room for, so the weight can pass it by what they add. Default:
   * no bound.
   */
  readonly maxPendingWeight?: number;
}

const ROOM: Promise<void> = Promise.resolve();

export class BatchQueue<T> {
  readonly #run: (batch: readonly T[]) => Promise<void>;
  readonly #delayMs: number | undefined;
  readonly #maxBatch: number;
  readonly #maxPending: number;
  readonly #weigh: ((item: T) => number) | undefined;
  readonly #maxWeight: number;
  #queue: T[] = [];
  /** Each queued item's weight, in `#queue`'s order (empty without `weigh`): weighed once, when added. */
  #weights: number[] = [];
  /** Items of the batch that is running. */
  #inBatch = 0;
  /** Weight of the items queued and of the running batch's. */
  #weight = 0;
  /** Adders waiting for room, first come first served. */
  readonly #waiting: (() => void)[] = [];
  #pending: { cancel(): void } | undefined;
  #running: Promise<void> | undefined;

  constructor(run: (batch: readonly T[]) => Promise<void>, options: BatchQueueOptions<T> = {}) {
    this.#run = run;
    this.#delayMs = options.delayMs;
    this.#maxBatch = options.maxBatch ?? Number.POSITIVE_INFINITY;
    this.#maxPending = options.maxPending ?? Number.POSITIVE_INFINITY;
    this.#weigh = options.weigh;
    this.#maxWeight = options.maxPendingWeight ?? Number.POSITIVE_INFINITY;
    if (!(this.#maxPending >= 1))
      throw new RangeError(`BatchQueue: maxPending must be at least 1 (got ${this.#maxPending})`);
    if (!(this.#maxWeight > 0))
      throw new RangeError(`BatchQueue: maxPendingWeight must be above 0 (got ${this.#maxWeight})`);
  }

  /** Weight of the items added and not yet run. */
  get pendingWeight(): number {
    return this.#weight;
  }

  /** Items added and not yet run: queued, or in the running batch. */
  get pending(): number {
    return this.#queue.length + this.#inBatch;
  }

  /**
   * Whether {@link BatchQueue.room} would make an adder wait: `maxPending` items or
   * `maxPendingWeight` wait, or adders already do.
   */
  get full(): boolean {
    return this.pending >= this.#maxPending || this.#heavy() || this.#waiting.length > 0;
  }

  /** Queue one item; its batch runs later (see {@link BatchQueueOptions}). */
  add(item: T): void {
    this.#queue.push(item);
    if (this.#weigh !== undefined) {
      const weight = this.#weigh(item);
      this.#weights.push(weight);
      this.#weight += weight;
    }
    if (this.#queue.length >= this.#maxBatch) void this.#kick();
    else this.#schedule();
  }

  #heavy(): boolean {
    return this.#weight >= this.#maxWeight && this.pending > 0;
  }

  /**
   * Resolves at once while fewer than `maxPending` items wait; otherwise once batches have run and
   * made room, starting the next batch now rather than at its timer. A producer that awaits this
   * before each `add` keeps the queue bounded (by `maxPending` plus the producers waiting at once);
   * nothing is dropped. Never rejects.
   */
  room(): Promise<void> {
    if (!this.full) return ROOM;
    const wait = new Promise<void>((resolve) => this.#waiting.push(resolve));
    void this.#kick();
    return wait;
  }

  /** Resolves once every item added so far has run (or its batch failed). Never rejects. */
  async settled(): Promise<void> {
    while (this.#queue.length > 0 || this.#running !== undefined) await this.#kick();
  }

  #schedule(): void {
    if (this.#pending !== undefined || this.#running !== undefined) return;
    if (this.#delayMs === undefined) {
      const immediate = setImmediate(() => void this.#kick());
      this.#pending = { cancel: () => clearImmediate(immediate) };
    } else {
      const timer = setTimeout(() => void this.#kick(), this.#delayMs);
      timer.unref();
      this.#pending = { cancel: () => clearTimeout(timer) };
    }
  }

  #kick(): Promise<void> {
    this.#pending?.cancel();
    this.#pending = undefined;
    this.#running ??= this.#drain().finally(() => {
      this.#running = undefined;
      // Added after the drain's last look at the queue, before this callback: not left behind.
      if (this.#queue.length > 0) this.#schedule();
      this.#release();
    });
    return this.#running;
  }

  async #drain(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue.splice(0, this.#maxBatch);
      const weights = this.#weights.splice(0, batch.length);
      this.#inBatch = batch.length;
      try {
        await this.#run(batch);
      } catch {
        // The run function's to report: a failure never reaches the adder, the next batch still runs.
      }
      this.#inBatch = 0;
      for (const weight of weights) this.#weight -= weight;
      this.#release();
    }
  }

  /**
   * Let waiting adders go, as many as there is room for (each is expected to add one item); all of
   * them once nothing waits, so an adder that does not add after all never leaves the others stuck.
   */
  #release(): void {
    let room =
      this.pending === 0 && this.#running === undefined
        ? this.#waiting.length
        : this.#heavy()
          ? 0
          : this.#maxPending - this.pending;
    while (room-- > 0 && this.#waiting.length > 0) this.#waiting.shift()!();
  }
}
