/** What every port implementation of one open vault shares: the connection, limits, clock, lifetime. */
import { canonicalJson } from '../measure/canonical-json.js';
import type { ResolvedOptions } from './create.js';
import type { VaultConnection } from './dialect.js';
import { VaultArgumentError } from './errors.js';
import type { StoreScope } from './ports.js';
import type { Watermarks } from './retention.js';

export interface StoreContext {
  readonly conn: VaultConnection;
  /** The resolved options (create.ts validates them). */
  readonly limits: Readonly<ResolvedOptions>;
  readonly marks: Watermarks;
  /** ISO-8601 UTC from the configured clock. */
  nowIso(): string;
  /** The configured clock (ms). */
  clock(): number;
  /** This vault object's retention backoff (src/vault/retention.ts, {@link RoomBackoff}). */
  readonly room: RoomBackoff;
}

/**
 * Until when (configured clock, ms) a put that needs room is refused without a retention pass: set
 * when a put was refused for capacity, cleared by a session closed through this vault object.
 */
export interface RoomBackoff {
  fullUntil: number;
}

const LABEL_MAX = 200;

/** A short label column value (tool, session, call, mode): clipped, and made storable by the dialect. */
export function label(ctx: StoreContext, value: string | undefined): string {
  return ctx.conn.label((value ?? '').slice(0, LABEL_MAX));
}

export function requireCount(name: string, value: number | undefined, min = 0): number {
  const v = value ?? min;
  if (!Number.isInteger(v) || v < min)
    throw new VaultArgumentError(`${name} must be an integer ≥ ${min} (got ${String(value)})`);
  return v;
}

/** Canonical compact JSON of tool arguments; provenance must never make a put fail. */
export function argsJson(args: unknown): string {
  if (args === undefined) return '{}';
  try {
    return canonicalJson(args, { compact: true });
  } catch {
    return '"[unserializable arguments]"';
  }
}

/** A tenant and session as stored (labels); no `sessionId`: every session of the tenant. */
export type StoredKey = { readonly tenant: string; readonly sessionId?: string };

/** The stored key of the scope's session (`sessionId` when the scope names none, else ''). */
export function sessionKey(ctx: StoreContext, scope: StoreScope | undefined, sessionId?: string): StoredKey {
  return { tenant: label(ctx, scope?.tenant), sessionId: label(ctx, scope?.sessionId ?? sessionId ?? '') };
}

/** The scope with its names stored as labels (for the dialect's search), or undefined for an unscoped call. */
export function storedScope(ctx: StoreContext, scope: StoreScope | undefined): StoreScope | undefined {
  if (scope === undefined) return undefined;
  const tenant = label(ctx, scope.tenant);
  return scope.sessionId === undefined ? { tenant } : { tenant, sessionId: label(ctx, scope.sessionId) };
}
