/**
 * The experiment ledger: content-free rows that tag every session with the mode and model it ran
 * under and sum its token accounting, so two modes can be compared on real sessions. A session
 * whose mode or model changes midway is contaminated and excluded. A turn keeps only a salted
 * SHA-256 fingerprint of its user text (random salt per ledger), to pair the same task across modes.
 *
 * Storage: the vault's kysely stores and migration path (ledger-schema.ts). On SQLite a separate
 * file (TOKEN_TERMINATOR_LEDGER_PATH), so resetting the vault never loses experiment history; on
 * PostgreSQL (TOKEN_TERMINATOR_DB_URL) its own tables in the vault's database.
 */
import { randomBytes, createHash } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { ConfigError, TokenTerminatorError } from '../errors.js';
import { definedFields } from '../options.js';
import type { StoreConnection } from '../vault/dialect.js';
import { openPostgresStore } from '../vault/dialect/postgres/postgres-store.js';
import type { ActivityReading } from '../activity.js';
import { openSqliteStore } from '../vault/dialect/sqlite/sqlite-store.js';
import { LEDGER_SCHEMA, type LedgerDatabase, type SessionRow } from './ledger-schema.js';

/** Token accounting of one turn (the host's, or replay's synthesized input tokens). */
export interface Usage {
  readonly inputTokens?: number;
  readonly outputTokens?: number;
  readonly cacheReadTokens?: number;
  readonly cacheWriteTokens?: number;
  /** A subset of output tokens: stored, never added to totals. */
  readonly reasoningTokens?: number;
}

/** How a ledger turn ended. */
export type TurnOutcome = 'completed' | 'failed' | 'interrupted';

/** A session as the ledger records it. */
export interface LedgerSession {
  readonly sessionId: string;
  readonly experiment: string;
  readonly mode: string;
  readonly initialModel: string | null;
  readonly lastModel: string | null;
  readonly contaminated: boolean;
  readonly contaminationReason: string | null;
  readonly turnCount: number;
  readonly totalTokens: number;
  readonly rawTokens: number;
  readonly finalTokens: number;
  readonly requests: number;
}

/** Per-mode figures of an experiment: sessions, turns and token totals. */
export interface ModeSummary {
  readonly mode: string;
  readonly sessions: number;
  readonly turns: number;
  readonly meanTotalTokens: number | null;
  readonly medianTotalTokens: number | null;
  readonly rawTokens: number;
  readonly finalTokens: number;
}

/** Two modes of one experiment side by side, with the difference of their per-session totals. */
export interface Comparison {
  readonly experiment: string;
  readonly a: ModeSummary;
  readonly b: ModeSummary;
  readonly excludedContaminatedSessions: number;
  /** b − a of the per-session totals; `available` false when either side has no sessions. */
  readonly delta: {
    readonly available: boolean;
    readonly meanTotalTokens: number | null;
    readonly medianTotalTokens: number | null;
  };
  /** Completed turns with the same prompt fingerprint and model, paired in start order. */
  readonly matchedTurns: {
    readonly pairs: number;
    readonly meanDelta: number | null;
    readonly medianDelta: number | null;
  };
  readonly notes: readonly string[];
}

/** One turn that is one request, as {@link Ledger.recordTurn} records it. */
export interface TurnRecord {
  readonly sessionId: string;
  readonly turnId: string;
  readonly mode: string;
  readonly model?: string;
  readonly experiment?: string;
  readonly prompt?: string;
  readonly rawTokens: number;
  readonly finalTokens: number;
  readonly usage?: Usage;
  readonly outcome: TurnOutcome;
}

/** What a session is tagged with. */
export type SessionTag = Pick<TurnRecord, 'sessionId' | 'mode' | 'model' | 'experiment'>;

/** The A/B experiment ledger: sessions tagged with a mode, their turns and token totals, and the comparison of two modes. */
export interface Ledger extends AsyncDisposable {
  /** The file, or the database URL without its password. */
  readonly path: string;
  /** Tag a session (first mode and model win); a different mode or model contaminates it. */
  ensureSession(input: SessionTag): Promise<LedgerSession>;
  /** Open a turn; `prompt` is fingerprinted (salted hash) and never stored. */
  startTurn(input: { sessionId: string; turnId: string; mode: string; model?: string; prompt?: string }): Promise<void>;
  /** Close a turn with its accounting; the first finish counts the turn. */
  finishTurn(input: { sessionId: string; turnId: string; usage?: Usage; outcome: TurnOutcome }): Promise<void>;
  /** Add one request's raw/final token counts (measured by us) to the session and turn. */
  recordRequest(input: { sessionId: string; turnId?: string; rawTokens: number; finalTokens: number }): Promise<void>;
  /**
   * ensureSession + startTurn + recordRequest + finishTurn of one turn that is one request, in one
   * transaction (a live host's turn: what the facade and the gateway record per request).
   */
  recordTurn(input: TurnRecord): Promise<void>;
  /** {@link recordTurn} of many turns, in order, in one transaction (a batch of answered requests). */
  recordTurns(inputs: readonly TurnRecord[]): Promise<void>;
  session(sessionId: string): Promise<LedgerSession | undefined>;
  sessions(experiment?: string): Promise<LedgerSession[]>;
  compare(a: string, b: string, options?: { experiment?: string }): Promise<Comparison>;
  close(): Promise<void>;
}

/** The ledger was asked something it cannot answer (identical modes). */
export class LedgerError extends TokenTerminatorError {
  constructor(message: string) {
    super('E_LEDGER', message);
  }
}

const LABEL_MAX = 200;
const label = (s: string | undefined): string | null => (s === undefined ? null : s.slice(0, LABEL_MAX));
const count = (n: number | undefined): number => (n !== undefined && Number.isFinite(n) && n > 0 ? Math.floor(n) : 0);
const now = (): string => new Date().toISOString();

export interface LedgerOptions {
  /** SQLite file (created 0600 in a 0700 directory), or ':memory:'. */
  readonly path?: string;
  /** PostgreSQL connection string: the ledger goes into that database (wins over `path`). */
  readonly url?: string;
  /** Lock wait in ms. Default 5000. */
  readonly busyTimeoutMs?: number;
  /** SQLite: the reductions whose quiet the ledger file's WAL checkpoints wait for (the Terminator's). Default: none. */
  readonly activity?: ActivityReading;
}

/**
 * Open (or create) a ledger.
 *
 * @example
 * const ledger = await openLedger({ path: config.ledgerPath });
 * await ledger.ensureSession({ sessionId, mode: config.mode, model });
 */
export async function openLedger(options: LedgerOptions): Promise<Ledger> {
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  const { url, path, activity } = options;
  if (url !== undefined && url !== '')
    return ledgerOn(
      await openPostgresStore<LedgerDatabase>(LEDGER_SCHEMA, {
        url,
        busyTimeoutMs,
        poolSize: 2,
        statementTimeoutMs: 30_000,
      }),
    );
  if (typeof path === 'string' && path !== '')
    return ledgerOn(
      await openSqliteStore<LedgerDatabase>(LEDGER_SCHEMA, { path, busyTimeoutMs, ...definedFields({ activity }) }),
    );
  throw new ConfigError('openLedger: `path` (a file) or `url` (postgres://…) is required');
}

type LedgerDb = Kysely<LedgerDatabase>;

function toSession(row: SessionRow): LedgerSession {
  return {
    sessionId: String(row.session_id),
    experiment: String(row.experiment),
    mode: String(row.mode),
    initialModel: row.initial_model ?? null,
    lastModel: row.last_model ?? null,
    contaminated: Number(row.contaminated) === 1,
    contaminationReason: row.contamination_reason ?? null,
    turnCount: Number(row.turn_count),
    totalTokens:
      Number(row.input_tokens) +
      Number(row.output_tokens) +
      Number(row.cache_read_tokens) +
      Number(row.cache_write_tokens),
    rawTokens: Number(row.raw_tokens),
    finalTokens: Number(row.final_tokens),
    requests: Number(row.requests),
  };
}

const getSession = (trx: LedgerDb, sessionId: string) =>
  trx.selectFrom('sessions').selectAll().where('session_id', '=', sessionId).executeTakeFirst();

const contaminate = (trx: LedgerDb, sessionId: string, reason: string) =>
  trx
    .updateTable('sessions')
    .set((eb) => ({ contaminated: 1, contamination_reason: eb.fn.coalesce('contamination_reason', eb.val(reason)) }))
    .where('session_id', '=', sessionId)
    .execute();

async function ensureIn(trx: LedgerDb, { sessionId, mode, model, experiment }: SessionTag): Promise<LedgerSession> {
  const t = now();
  await trx
    .insertInto('sessions')
    .values({
      session_id: sessionId,
      experiment: (experiment ?? 'default').slice(0, 80),
      mode: label(mode) ?? '',
      initial_model: label(model),
      last_model: label(model),
      tagged_at: t,
      last_seen_at: t,
    })
    .onConflict((oc) => oc.doNothing())
    .execute();
  const row = await getSession(trx, sessionId);
  if (row !== undefined) {
    if (row.mode !== mode)
      await contaminate(trx, sessionId, `runtime mode changed from ${String(row.mode)} to ${label(mode)}`);
    const initial = row.initial_model;
    if (model !== undefined && initial !== null && initial !== label(model))
      await contaminate(trx, sessionId, 'model changed within session');
    await trx
      .updateTable('sessions')
      .set((eb) => ({ last_seen_at: now(), last_model: eb.fn.coalesce(eb.val(label(model)), eb.ref('last_model')) }))
      .where('session_id', '=', sessionId)
      .execute();
  }
  return toSession((await getSession(trx, sessionId)) as SessionRow);
}

async function startIn(
  trx: LedgerDb,
  { sessionId, turnId, mode, model }: { sessionId: string; turnId: string; mode: string; model?: string },
  fp: string | null,
  ensure = true,
): Promise<void> {
  if (ensure) await ensureIn(trx, model === undefined ? { sessionId, mode } : { sessionId, mode, model });
  const next = await trx
    .selectFrom('turns')
    .select((eb) => eb.fn.coalesce(eb.fn.max('seq'), eb.lit(0)).as('seq'))
    .where('session_id', '=', sessionId)
    .executeTakeFirstOrThrow();
  await trx
    .insertInto('turns')
    .values({
      session_id: sessionId,
      turn_id: turnId,
      seq: Number(next.seq) + 1,
      mode: label(mode) ?? '',
      model: label(model),
      prompt_fingerprint: fp,
      started_at: now(),
    })
    .onConflict((oc) => oc.doNothing())
    .execute();
}

type FinishInput = Parameters<Ledger['finishTurn']>[0];
type RecordInput = Parameters<Ledger['recordRequest']>[0];

async function finishIn(trx: LedgerDb, { sessionId, turnId, usage = {}, outcome }: FinishInput): Promise<void> {
  const u = {
    input_tokens: count(usage.inputTokens),
    output_tokens: count(usage.outputTokens),
    cache_read_tokens: count(usage.cacheReadTokens),
    cache_write_tokens: count(usage.cacheWriteTokens),
    reasoning_tokens: count(usage.reasoningTokens),
  };
  // Only the first finish counts: the update matches a turn that has not ended yet.
  const ended = await trx
    .updateTable('turns')
    .set({ ended_at: now(), outcome, ...u })
    .where('session_id', '=', sessionId)
    .where('turn_id', '=', turnId)
    .where('ended_at', 'is', null)
    .executeTakeFirst();
  if (Number(ended.numUpdatedRows) === 0) return;
  await trx
    .updateTable('sessions')
    .set((eb) => ({
      turn_count: eb('turn_count', '+', 1),
      completed_turns: eb('completed_turns', '+', outcome === 'completed' ? 1 : 0),
      failed_turns: eb('failed_turns', '+', outcome === 'failed' ? 1 : 0),
      interrupted_turns: eb('interrupted_turns', '+', outcome === 'interrupted' ? 1 : 0),
      input_tokens: eb('input_tokens', '+', u.input_tokens),
      output_tokens: eb('output_tokens', '+', u.output_tokens),
      cache_read_tokens: eb('cache_read_tokens', '+', u.cache_read_tokens),
      cache_write_tokens: eb('cache_write_tokens', '+', u.cache_write_tokens),
      reasoning_tokens: eb('reasoning_tokens', '+', u.reasoning_tokens),
    }))
    .where('session_id', '=', sessionId)
    .execute();
}

async function recordIn(trx: LedgerDb, { sessionId, turnId, rawTokens, finalTokens }: RecordInput): Promise<void> {
  const raw = count(rawTokens);
  const fin = count(finalTokens);
  // The same increments on the session's totals and on the turn's.
  const plus = (column: 'requests' | 'raw_tokens' | 'final_tokens', n: number) =>
    sql<number>`${sql.ref(column)} + ${n}`;
  const added = {
    requests: plus('requests', 1),
    raw_tokens: plus('raw_tokens', raw),
    final_tokens: plus('final_tokens', fin),
  };
  await trx.updateTable('sessions').set(added).where('session_id', '=', sessionId).execute();
  if (turnId !== undefined) {
    await trx
      .updateTable('turns')
      .set(added)
      .where('session_id', '=', sessionId)
      .where('turn_id', '=', turnId)
      .execute();
  }
}

async function listSessions(db: LedgerDb, experiment: string | undefined): Promise<LedgerSession[]> {
  let q = db.selectFrom('sessions').selectAll().orderBy('tagged_at').orderBy('session_id');
  if (experiment !== undefined) q = q.where('experiment', '=', experiment);
  return (await q.execute()).map(toSession);
}

function summarize(mode: string, rows: LedgerSession[]): ModeSummary {
  const totals = rows.map((r) => r.totalTokens);
  return {
    mode,
    sessions: rows.length,
    turns: rows.reduce((x, s) => x + s.turnCount, 0),
    meanTotalTokens: totals.length === 0 ? null : round(totals.reduce((x, y) => x + y, 0) / totals.length, 4),
    medianTotalTokens: totals.length === 0 ? null : round(median(totals), 4),
    rawTokens: rows.reduce((x, r) => x + r.rawTokens, 0),
    finalTokens: rows.reduce((x, r) => x + r.finalTokens, 0),
  };
}

/** b − a of the totals of completed turns with the same prompt fingerprint and model, paired in start order. */
async function matchedTurnDeltas(db: LedgerDb, experiment: string, a: string, b: string): Promise<number[]> {
  const turns = await db
    .selectFrom('turns as t')
    .innerJoin('sessions as s', 's.session_id', 't.session_id')
    .select((e) => [
      't.prompt_fingerprint as fp',
      't.model as model',
      't.mode as mode',
      e(
        e(e('t.input_tokens', '+', e.ref('t.output_tokens')), '+', e.ref('t.cache_read_tokens')),
        '+',
        e.ref('t.cache_write_tokens'),
      ).as('total'),
    ])
    .where('s.experiment', '=', experiment)
    .where('s.contaminated', '=', 0)
    .where('t.outcome', '=', 'completed')
    .where('t.prompt_fingerprint', 'is not', null)
    .where('t.mode', 'in', [a, b])
    .orderBy('t.started_at')
    .orderBy('t.session_id')
    .orderBy('t.seq')
    .execute();
  const groups = new Map<string, { a: number[]; b: number[] }>();
  for (const row of turns) {
    const key = `${row.fp ?? ''}\0${row.model ?? ''}`;
    const g = groups.get(key) ?? { a: [], b: [] };
    (row.mode === a ? g.a : g.b).push(Number(row.total));
    groups.set(key, g);
  }
  return [...groups.values()].flatMap((g) => g.b.slice(0, g.a.length).map((x, i) => x - g.a[i]!));
}

async function compareModes(db: LedgerDb, a: string, b: string, options: { experiment?: string }): Promise<Comparison> {
  if (a === b) throw new LedgerError(`comparison modes must differ (got ${a} twice)`);
  const experiment = options.experiment ?? 'default';
  const all = await listSessions(db, experiment);
  const excluded = all.filter((s) => (s.mode === a || s.mode === b) && s.contaminated).length;
  const eligible = (m: string) => all.filter((s) => s.mode === m && !s.contaminated && s.turnCount > 0);
  const sa = summarize(a, eligible(a));
  const sb = summarize(b, eligible(b));
  const available = sa.sessions > 0 && sb.sessions > 0;
  const deltas = await matchedTurnDeltas(db, experiment, a, b);
  return {
    experiment,
    a: sa,
    b: sb,
    excludedContaminatedSessions: excluded,
    delta: {
      available,
      meanTotalTokens: available ? round(sb.meanTotalTokens! - sa.meanTotalTokens!, 8) : null,
      medianTotalTokens: available ? round(sb.medianTotalTokens! - sa.medianTotalTokens!, 8) : null,
    },
    matchedTurns: {
      pairs: deltas.length,
      meanDelta: deltas.length === 0 ? null : round(deltas.reduce((x, y) => x + y, 0) / deltas.length, 4),
      medianDelta: deltas.length === 0 ? null : round(median(deltas), 4),
    },
    notes: [
      'total tokens = input + output + cache read + cache write (reasoning is part of output, not added)',
      'sessions whose mode or model changed are excluded (contaminated)',
      'delta = b − a',
    ],
  };
}

function ledgerOn(store: StoreConnection<LedgerDatabase>): Ledger {
  const db = store.db;
  // The salt is per ledger (stored in its meta table on first use), read once per open ledger.
  let saltValue: string | undefined;
  const salt = async (): Promise<string> => {
    if (saltValue !== undefined) return saltValue;
    await db
      .insertInto('meta')
      .values({ key: 'fingerprint_salt', value: randomBytes(32).toString('hex') })
      .onConflict((oc) => oc.doNothing())
      .execute();
    saltValue = (
      await db.selectFrom('meta').select('value').where('key', '=', 'fingerprint_salt').executeTakeFirstOrThrow()
    ).value;
    return saltValue;
  };
  const fingerprintOf = async (prompt: string | undefined): Promise<string | null> =>
    prompt === undefined || prompt.trim() === ''
      ? null
      : createHash('sha256')
          .update(`${await salt()}\0${prompt.normalize('NFKC').replace(/\s+/gu, ' ').trim()}`, 'utf8')
          .digest('hex');

  const recordTurns = async (inputs: readonly TurnRecord[]): Promise<void> => {
    if (inputs.length === 0) return;
    const fps = await Promise.all(inputs.map((i) => fingerprintOf(i.prompt)));
    await store.write(async (trx) => {
      // Tagging a session again with the mode, model and experiment its previous turn in this
      // transaction was tagged with changes nothing: skipped.
      const tagged = new Map<string, string>();
      // Each step reads its own fields of the record.
      for (const [i, input] of inputs.entries()) {
        const tag = JSON.stringify([input.mode, input.model ?? null, input.experiment ?? null]);
        if (tagged.get(input.sessionId) !== tag) {
          tagged.set(input.sessionId, tag);
          await ensureIn(trx, input);
        }
        await startIn(trx, input, fps[i] ?? null, false);
        await recordIn(trx, input);
        await finishIn(trx, input);
      }
    });
  };

  const close = async (): Promise<void> => store.destroy();
  return {
    path: store.location,
    ensureSession: (input) => store.write((trx) => ensureIn(trx, input)),
    async startTurn(input) {
      const fp = await fingerprintOf(input.prompt);
      await store.write((trx) => startIn(trx, input, fp));
    },
    finishTurn: (input) => store.write((trx) => finishIn(trx, input)),
    recordRequest: (input) => store.write((trx) => recordIn(trx, input)),
    recordTurn: (input) => recordTurns([input]),
    recordTurns,
    async session(sessionId) {
      const row = await getSession(db, sessionId);
      return row === undefined ? undefined : toSession(row);
    },
    sessions: (experiment) => listSessions(db, experiment),
    compare: (a, b, options = {}) => compareModes(db, a, b, options),
    close,
    [Symbol.asyncDispose]: close,
  };
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((x, y) => x - y);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** `x` rounded to `digits` decimals (the figures a ledger and a replay print). */
export function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
