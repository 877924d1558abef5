/**
 * The experiment ledger (facts §2.13): a separate, content-free SQLite file that tags every
 * session with the mode and model it ran under and sums its token accounting, so two modes can be
 * compared on real sessions. A session whose mode or model changes midway is contaminated and
 * excluded from comparisons. Prompts never enter the file: a turn keeps only a salted SHA-256
 * fingerprint of its user text (the salt is random per ledger file), used to pair the same task
 * across modes.
 *
 * A separate file (not the vault) so the ledger can be kept, copied or shared without the
 * evidence, and so resetting the vault never loses experiment history. Plain better-sqlite3
 * (synchronous, prepared statements): the ledger is two small tables written once per turn.
 */
import { randomBytes, createHash } from 'node:crypto';
import { chmodSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { TokenTerminatorError } from '../errors.js';

/** Token accounting of one turn (the host's, or replay's synthesized input tokens). */
export interface Usage {
  readonly inputTokens?: number;
  readonly outputTokens?: number;
  readonly cacheReadTokens?: number;
  readonly cacheWriteTokens?: number;
  /** A subset of output tokens: stored, never added to totals. */
  readonly reasoningTokens?: number;
}

export type TurnOutcome = 'completed' | 'failed' | 'interrupted';

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

export interface ModeSummary {
  readonly mode: string;
  readonly sessions: number;
  readonly turns: number;
  readonly meanTotalTokens: number | null;
  readonly medianTotalTokens: number | null;
  readonly rawTokens: number;
  readonly finalTokens: number;
}

export interface Comparison {
  readonly experiment: string;
  readonly a: ModeSummary;
  readonly b: ModeSummary;
  readonly excludedContaminatedSessions: number;
  /** b − a of the per-session totals; `available` false when either side has no sessions. */
  readonly delta: { readonly available: boolean; readonly meanTotalTokens: number | null; readonly medianTotalTokens: number | null };
  /** Completed turns with the same prompt fingerprint and model, paired in start order. */
  readonly matchedTurns: { readonly pairs: number; readonly meanDelta: number | null; readonly medianDelta: number | null };
  readonly notes: readonly string[];
}

export interface Ledger {
  readonly path: string;
  /** Tag a session (first mode and model win); a different mode or model contaminates it. */
  ensureSession(input: { sessionId: string; mode: string; model?: string; experiment?: string }): LedgerSession;
  /** Open a turn; `prompt` is fingerprinted (salted hash) and never stored. */
  startTurn(input: { sessionId: string; turnId: string; mode: string; model?: string; prompt?: string }): void;
  /** Close a turn with its accounting; the first finish counts the turn. */
  finishTurn(input: { sessionId: string; turnId: string; usage?: Usage; outcome: TurnOutcome }): void;
  /** Add one request's raw/final token counts (measured by us) to the session and turn. */
  recordRequest(input: { sessionId: string; turnId?: string; rawTokens: number; finalTokens: number }): void;
  session(sessionId: string): LedgerSession | undefined;
  sessions(experiment?: string): LedgerSession[];
  compare(a: string, b: string, options?: { experiment?: string }): Comparison;
  close(): void;
}

/** The ledger was asked something it cannot answer (identical modes). */
export class LedgerError extends TokenTerminatorError {
  constructor(message: string) {
    super('E_LEDGER', message);
  }
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
  session_id TEXT PRIMARY KEY, experiment TEXT NOT NULL, mode TEXT NOT NULL,
  initial_model TEXT, last_model TEXT, contaminated INTEGER NOT NULL DEFAULT 0, contamination_reason TEXT,
  tagged_at TEXT NOT NULL, last_seen_at TEXT NOT NULL,
  turn_count INTEGER NOT NULL DEFAULT 0, completed_turns INTEGER NOT NULL DEFAULT 0,
  failed_turns INTEGER NOT NULL DEFAULT 0, interrupted_turns INTEGER NOT NULL DEFAULT 0,
  input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
  cache_read_tokens INTEGER NOT NULL DEFAULT 0, cache_write_tokens INTEGER NOT NULL DEFAULT 0,
  reasoning_tokens INTEGER NOT NULL DEFAULT 0,
  requests INTEGER NOT NULL DEFAULT 0, raw_tokens INTEGER NOT NULL DEFAULT 0, final_tokens INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS turns (
  session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE, turn_id TEXT NOT NULL,
  seq INTEGER NOT NULL, mode TEXT NOT NULL, model TEXT, prompt_fingerprint TEXT,
  started_at TEXT NOT NULL, ended_at TEXT, outcome TEXT,
  input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
  cache_read_tokens INTEGER NOT NULL DEFAULT 0, cache_write_tokens INTEGER NOT NULL DEFAULT 0,
  reasoning_tokens INTEGER NOT NULL DEFAULT 0,
  requests INTEGER NOT NULL DEFAULT 0, raw_tokens INTEGER NOT NULL DEFAULT 0, final_tokens INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (session_id, turn_id));
CREATE INDEX IF NOT EXISTS sessions_by_mode ON sessions (experiment, mode, contaminated);
CREATE INDEX IF NOT EXISTS turns_by_fingerprint ON turns (prompt_fingerprint, mode, model);
`;

const LABEL_MAX = 200;
const label = (s: string | undefined): string | null => (s === undefined ? null : s.slice(0, LABEL_MAX));
const count = (n: number | undefined): number => (n !== undefined && Number.isFinite(n) && n > 0 ? Math.floor(n) : 0);
const now = (): string => new Date().toISOString();

/**
 * Open (or create) a ledger file. `':memory:'` is allowed (tests).
 *
 * @example
 * const ledger = openLedger({ path: config.ledgerPath });
 * ledger.ensureSession({ sessionId, mode: config.mode, model });
 */
export function openLedger(options: { path: string }): Ledger {
  const path = options.path;
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const db = new Database(path);
  if (path !== ':memory:') {
    db.pragma('journal_mode = WAL');
    chmodSync(path, 0o600);
  }
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
  db.exec(SCHEMA);
  let salt = (db.prepare("SELECT value FROM meta WHERE key = 'fingerprint_salt'").get() as { value: string } | undefined)?.value;
  if (salt === undefined) {
    salt = randomBytes(32).toString('hex');
    db.prepare("INSERT OR IGNORE INTO meta (key, value) VALUES ('fingerprint_salt', ?)").run(salt);
    salt = (db.prepare("SELECT value FROM meta WHERE key = 'fingerprint_salt'").get() as { value: string }).value;
  }
  const fingerprint = (text: string): string =>
    createHash('sha256').update(`${salt}\0${text.normalize('NFKC').replace(/\s+/gu, ' ').trim()}`, 'utf8').digest('hex');

  const st = {
    getSession: db.prepare('SELECT * FROM sessions WHERE session_id = ?'),
    insertSession: db.prepare(
      'INSERT OR IGNORE INTO sessions (session_id, experiment, mode, initial_model, last_model, tagged_at, last_seen_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
    ),
    touch: db.prepare('UPDATE sessions SET last_seen_at = ?, last_model = COALESCE(?, last_model) WHERE session_id = ?'),
    contaminate: db.prepare('UPDATE sessions SET contaminated = 1, contamination_reason = COALESCE(contamination_reason, ?) WHERE session_id = ?'),
    nextSeq: db.prepare('SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM turns WHERE session_id = ?'),
    insertTurn: db.prepare(
      'INSERT OR IGNORE INTO turns (session_id, turn_id, seq, mode, model, prompt_fingerprint, started_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
    ),
    getTurn: db.prepare('SELECT ended_at FROM turns WHERE session_id = ? AND turn_id = ?'),
    finishTurn: db.prepare(
      `UPDATE turns SET ended_at = ?, outcome = ?, input_tokens = ?, output_tokens = ?, cache_read_tokens = ?, cache_write_tokens = ?,
       reasoning_tokens = ? WHERE session_id = ? AND turn_id = ?`,
    ),
    addSessionUsage: db.prepare(
      `UPDATE sessions SET turn_count = turn_count + 1, completed_turns = completed_turns + ?, failed_turns = failed_turns + ?,
       interrupted_turns = interrupted_turns + ?, input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,
       cache_read_tokens = cache_read_tokens + ?, cache_write_tokens = cache_write_tokens + ?, reasoning_tokens = reasoning_tokens + ?
       WHERE session_id = ?`,
    ),
    addSessionRequest: db.prepare(
      'UPDATE sessions SET requests = requests + 1, raw_tokens = raw_tokens + ?, final_tokens = final_tokens + ? WHERE session_id = ?',
    ),
    addTurnRequest: db.prepare(
      'UPDATE turns SET requests = requests + 1, raw_tokens = raw_tokens + ?, final_tokens = final_tokens + ? WHERE session_id = ? AND turn_id = ?',
    ),
    listSessions: db.prepare('SELECT * FROM sessions WHERE (? IS NULL OR experiment = ?) ORDER BY tagged_at, session_id'),
    matchedTurns: db.prepare(
      `SELECT t.prompt_fingerprint AS fp, t.model AS model, t.mode AS mode,
         t.input_tokens + t.output_tokens + t.cache_read_tokens + t.cache_write_tokens AS total
       FROM turns t JOIN sessions s ON s.session_id = t.session_id
       WHERE s.experiment = ? AND s.contaminated = 0 AND t.outcome = 'completed' AND t.prompt_fingerprint IS NOT NULL AND t.mode IN (?, ?)
       ORDER BY t.started_at, t.session_id, t.seq`,
    ),
  };

  const toSession = (row: Record<string, unknown>): LedgerSession => ({
    sessionId: String(row['session_id']),
    experiment: String(row['experiment']),
    mode: String(row['mode']),
    initialModel: (row['initial_model'] as string | null) ?? null,
    lastModel: (row['last_model'] as string | null) ?? null,
    contaminated: row['contaminated'] === 1,
    contaminationReason: (row['contamination_reason'] as string | null) ?? null,
    turnCount: Number(row['turn_count']),
    totalTokens: Number(row['input_tokens']) + Number(row['output_tokens']) + Number(row['cache_read_tokens']) + Number(row['cache_write_tokens']),
    rawTokens: Number(row['raw_tokens']),
    finalTokens: Number(row['final_tokens']),
    requests: Number(row['requests']),
  });

  const checkTag = (sessionId: string, mode: string, model: string | undefined): void => {
    const row = st.getSession.get(sessionId) as Record<string, unknown> | undefined;
    if (row === undefined) return;
    if (row['mode'] !== mode) st.contaminate.run(`runtime mode changed from ${String(row['mode'])} to ${label(mode)}`, sessionId);
    const initial = row['initial_model'] as string | null;
    if (model !== undefined && initial !== null && initial !== label(model)) st.contaminate.run('model changed within session', sessionId);
    st.touch.run(now(), label(model), sessionId);
  };

  const ensureSession: Ledger['ensureSession'] = ({ sessionId, mode, model, experiment }) => {
    const t = now();
    st.insertSession.run(sessionId, (experiment ?? 'default').slice(0, 80), label(mode), label(model), label(model), t, t);
    checkTag(sessionId, mode, model);
    return toSession(st.getSession.get(sessionId) as Record<string, unknown>);
  };

  const summarize = (mode: string, rows: LedgerSession[], turns: number): ModeSummary => {
    const totals = rows.map((r) => r.totalTokens);
    return {
      mode,
      sessions: rows.length,
      turns,
      meanTotalTokens: totals.length === 0 ? null : round(totals.reduce((x, y) => x + y, 0) / totals.length, 4),
      medianTotalTokens: totals.length === 0 ? null : round(median(totals), 4),
      rawTokens: rows.reduce((x, r) => x + r.rawTokens, 0),
      finalTokens: rows.reduce((x, r) => x + r.finalTokens, 0),
    };
  };

  return {
    path,
    ensureSession,
    startTurn({ sessionId, turnId, mode, model, prompt }) {
      ensureSession(model === undefined ? { sessionId, mode } : { sessionId, mode, model });
      const seq = (st.nextSeq.get(sessionId) as { seq: number }).seq;
      st.insertTurn.run(sessionId, turnId, seq, label(mode), label(model), prompt === undefined || prompt.trim() === '' ? null : fingerprint(prompt), now());
    },
    finishTurn({ sessionId, turnId, usage = {}, outcome }) {
      const turn = st.getTurn.get(sessionId, turnId) as { ended_at: string | null } | undefined;
      if (turn === undefined || turn.ended_at !== null) return;
      const u = [count(usage.inputTokens), count(usage.outputTokens), count(usage.cacheReadTokens), count(usage.cacheWriteTokens), count(usage.reasoningTokens)] as const;
      db.transaction(() => {
        st.finishTurn.run(now(), outcome, ...u, sessionId, turnId);
        st.addSessionUsage.run(outcome === 'completed' ? 1 : 0, outcome === 'failed' ? 1 : 0, outcome === 'interrupted' ? 1 : 0, ...u, sessionId);
      }).immediate();
    },
    recordRequest({ sessionId, turnId, rawTokens, finalTokens }) {
      db.transaction(() => {
        st.addSessionRequest.run(count(rawTokens), count(finalTokens), sessionId);
        if (turnId !== undefined) st.addTurnRequest.run(count(rawTokens), count(finalTokens), sessionId, turnId);
      }).immediate();
    },
    session(sessionId) {
      const row = st.getSession.get(sessionId) as Record<string, unknown> | undefined;
      return row === undefined ? undefined : toSession(row);
    },
    sessions(experiment) {
      return (st.listSessions.all(experiment ?? null, experiment ?? null) as Record<string, unknown>[]).map(toSession);
    },
    compare(a, b, options = {}) {
      if (a === b) throw new LedgerError(`comparison modes must differ (got ${a} twice)`);
      const experiment = options.experiment ?? 'default';
      const all = (st.listSessions.all(experiment, experiment) as Record<string, unknown>[]).map(toSession);
      const inMode = (m: string) => all.filter((s) => s.mode === m);
      const excluded = all.filter((s) => (s.mode === a || s.mode === b) && s.contaminated).length;
      const eligible = (m: string) => inMode(m).filter((s) => !s.contaminated && s.turnCount > 0);
      const ea = eligible(a);
      const eb = eligible(b);
      const sa = summarize(a, ea, ea.reduce((x, s) => x + s.turnCount, 0));
      const sb = summarize(b, eb, eb.reduce((x, s) => x + s.turnCount, 0));
      const available = sa.sessions > 0 && sb.sessions > 0;
      const groups = new Map<string, { a: number[]; b: number[] }>();
      for (const row of st.matchedTurns.all(experiment, a, b) as { fp: string; model: string | null; mode: string; total: number }[]) {
        const key = `${row.fp}\0${row.model ?? ''}`;
        const g = groups.get(key) ?? { a: [], b: [] };
        (row.mode === a ? g.a : g.b).push(row.total);
        groups.set(key, g);
      }
      const deltas: number[] = [];
      for (const g of groups.values()) for (let i = 0; i < Math.min(g.a.length, g.b.length); i++) deltas.push(g.b[i]! - g.a[i]!);
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
    },
    close() {
      if (db.open) db.close();
    },
  };
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((x, y) => x - y);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
