/**
 * The session: everything one conversation holds in memory, in one typed object, and the one
 * bounded cache that owns them. The runtime keeps one cache for all its pipelines (a tool result
 * and a request of one conversation meet the same Session: the focus terms the request stage
 * writes are what the tool stage reads); an operator used alone keeps one per subscription.
 * Nothing here must outlive an eviction: what must (leases, baselines, sticky renderings) is in
 * the vault, and a session dropped here starts afresh from the request and the vault.
 */
import { LRUCache } from 'lru-cache';
import type { ConversationMemo } from '../compile/conversation.js';
import type { FocusTermsMemo } from '../compile/conversation-terms.js';
import type { SessionState } from '../compile/session.js';
import type { SessionCredits } from '../telemetry/tool-credits.js';
import { sessionStateKey, type StepContext } from '../step.js';
import type { TtlLru } from '../tools/ttl-cache.js';
import type { FitState } from '../window/fit-window.js';
import type { HostMemo } from './tool-outputs.js';

/** Whose session: the Step's session id and tenant (two tenants never share one, whatever the ids), or its `sessionStateKey`. */
export type SessionOf = Pick<StepContext, 'sessionId' | 'tenant'> | string;

const keyOf = (of: SessionOf): string => (typeof of === 'string' ? of : sessionStateKey(of));

/** The three kinds of call a session serves, each in arrival order. */
export type CallKind = 'tool_call' | 'tool_result' | 'request';

/**
 * One conversation's state. Each field belongs to the stage named in its comment, which fills it
 * on first use; a field left undefined costs nothing.
 */
export class Session {
  /** `sessionStateKey` of the session's id and tenant. */
  readonly key: string;
  /** collapseDuplicates: its request state (each request stage recognises the request it receives). */
  collapse: SessionState | undefined;
  /** compileRequest: its request state. */
  compile: SessionState | undefined;
  /** compileRequest: which items earlier requests showed inline or rewrote (mirrored in the vault). */
  conversation: ConversationMemo | undefined;
  /** fitWindow: its request state and the renderings it chose. */
  fit: FitState | undefined;
  /** The focus terms of the latest request (written by the request pipeline, read by the tool stage). */
  focus: readonly string[] = [];
  /** The focus terms of each conversation item, for the next request. */
  focusItems: FocusTermsMemo | undefined;
  /** routeSkills: the routed catalog per original catalog. */
  routed: Map<string, string> | undefined;
  /** rewriteTerminalCommand: rewrites by working directory and command (null: none). */
  rewrites: TtlLru<string | null> | undefined;
  /** The host path (src/runtime/host-path.ts): items and renderings shown, whether the recovery tool was offered. */
  host: HostMemo | undefined;
  /** Telemetry: what the tool outputs reduced for the session save in each request showing them (src/telemetry/tool-credits.ts). */
  credits: SessionCredits | undefined;
  /** Stored counts: the items of the session's requests measured so far. */
  seenItems = 0;
  /** The characters of the session's latest request, kept for a bound in bytes. */
  sized: { measure(...args: never[]): number } | undefined;
  /** What the session's state is accounted at (bytes; see {@link SessionCache.account}). */
  bytes = 0;
  /** The last call of each kind, which the next one of that kind waits for (calls of a kind run in order). */
  readonly #tails = new Map<CallKind, Promise<unknown>>();

  constructor(key: string) {
    this.key = key;
  }

  /** Run `call` after every earlier call of `kind` of this session settled. */
  inTurn<R>(kind: CallKind, call: () => Promise<R>): Promise<R> {
    const before = this.#tails.get(kind);
    const run = before === undefined ? call() : before.then(call, call);
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    this.#tails.set(kind, tail);
    void tail.then(() => {
      if (this.#tails.get(kind) === tail) this.#tails.delete(kind);
    });
    return run;
  }
}

/**
 * The sessions held now: the most recently used, bounded by count and by the bytes their state is
 * accounted at. The least recently used go first; the one just accounted stays even alone above the
 * byte bound.
 */
export class SessionCache {
  readonly #sessions: LRUCache<string, Session>;
  readonly #maxBytes: number;
  #bytes = 0;

  /**
   * @param max - sessions kept (at least 1).
   * @param maxBytes - bytes of state over all sessions (see {@link SessionCache.account}). Default unbounded.
   */
  constructor(max: number, maxBytes = Number.POSITIVE_INFINITY) {
    this.#maxBytes = maxBytes;
    this.#sessions = new LRUCache({
      max: Math.max(1, Math.floor(max)),
      dispose: (session) => {
        this.#bytes -= session.bytes;
        session.bytes = 0;
      },
    });
  }

  /** The session of `context`, made on first use (and after it was dropped). */
  of(context: SessionOf): Session {
    const key = keyOf(context);
    let session = this.#sessions.get(key);
    if (session === undefined) this.#sessions.set(key, (session = new Session(key)));
    return session;
  }

  /** The session of `context` when held now (its recency unchanged), else undefined. */
  peek(context: SessionOf): Session | undefined {
    return this.#sessions.peek(keyOf(context));
  }

  /** Entries held now for the session of `context`: its Session and the parts of it a host filled. */
  entries(context: SessionOf): number {
    const session = this.peek(context);
    return session === undefined ? 0 : 1 + Number(session.host !== undefined) + Number(session.credits !== undefined);
  }

  /** Whether a session of `context` is held now. */
  has(context: SessionOf): boolean {
    return this.#sessions.has(keyOf(context));
  }

  /** The sessions held now, least recently used first (their recency unchanged). */
  oldestFirst(): Session[] {
    return [...this.#sessions.rvalues()].filter((s) => s !== undefined);
  }

  /** Sessions held now. */
  get size(): number {
    return this.#sessions.size;
  }

  /** Bytes of state accounted over all sessions now. */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * Account a held session's state at `bytes` (replacing its earlier figure), then drop least
   * recently used sessions until the total is within the bound; this one stays even alone above it.
   */
  account(session: Session, bytes: number): void {
    if (this.#sessions.peek(session.key) !== session) return;
    this.#bytes += bytes - session.bytes;
    session.bytes = bytes;
    while (this.#bytes > this.#maxBytes) {
      const oldest = this.#sessions.rkeys().next().value;
      if (oldest === undefined || oldest === session.key) break;
      this.#sessions.delete(oldest);
    }
  }

  /** Drop a session and everything it held (its host ended it). */
  end(context: SessionOf): void {
    this.#sessions.delete(keyOf(context));
  }

  /** Drop every session. */
  clear(): void {
    this.#sessions.clear();
  }
}
