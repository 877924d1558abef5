/**
 * Search on SQLite with PostgreSQL's semantics (a folded plain-text substring of the content or of a
 * tool name). The needle is one bound FTS5 phrase, never syntax: the contentless trigram index answers
 * needles of 3…{@link INDEX_PHRASE_MAX} code points alone and yields candidates for longer ones; shorter
 * needles, and phrases FTS5 refuses, scan the content. Statements run on the event loop, so none is
 * long: the search yields every {@link SCAN_SLICE_BYTES} and stops at the deadline with `partial`.
 *
 * Indexing (a trigram insert costs about twenty plain INSERTs) is kept off `put`: rows queue in
 * `fts_pending`, indexed while idle (src/vault/idle.ts) and before each search; queued rows are scanned.
 */
import { sql, type Expression, type Kysely } from 'kysely';
import type { SearchBounds, SearchIndex } from '../../dialect.js';
import { codePoints } from '../../../measure/canonical-json.js';
import { foldCase } from '../../identity.js';
import type { StoreScope } from '../../ports.js';
import { prepared } from '../../prepared.js';
import { accessibleIds, selectSummaries, toolMatches, toSummary } from '../../queries.js';
import type { VaultDatabase } from '../../schema.js';
import type { ArtifactSummary } from '../../types.js';
import type { SqliteStore } from './sqlite-store.js';

const PENDING_BATCH_ROWS = 32;
/** Content bytes indexed per step (one artifact at least): keeps each step to tens of milliseconds per MB. */
const INDEX_STEP_BYTES = 256 * 1024;
/** Longest phrase given to the index (code points); longer needles are checked against candidates' content. */
export const INDEX_PHRASE_MAX = 24;
/** Content folded and scanned between two yields to the event loop. */
export const SCAN_SLICE_BYTES = 1024 * 1024;
/** Rows of light columns read per candidate page. */
const PAGE_ROWS = 256;

/** Quote text as one FTS5 phrase: inside double quotes only `"` is special, and doubling escapes it. */
export function ftsPhrase(text: string): string {
  return `"${text.replace(/"/g, '""')}"`;
}

const yieldTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** A new artifact queued for indexing (every put of new content): compiled once per connection. */
const queueForIndex = prepared((store: SqliteStore<VaultDatabase>, seq: number) =>
  store.db.insertInto('fts_pending').values({ seq }),
);

type Db = Kysely<VaultDatabase>;
type Candidate = { seq: number; bytes: number };

/** One batch in one IMMEDIATE transaction: rows another process indexed meanwhile are gone from the queue. */
async function indexBatch(trx: Db, budgetBytes: number): Promise<boolean> {
  const rows = await trx
    .selectFrom('fts_pending as p')
    .innerJoin('artifacts as a', 'a.seq', 'p.seq')
    .select(['p.seq as seq', 'a.byte_count as bytes'])
    .orderBy('p.seq')
    .limit(PENDING_BATCH_ROWS)
    .execute();
  let spent = 0;
  for (const row of rows) {
    if (spent > 0 && spent + row.bytes > budgetBytes) return true;
    spent += row.bytes;
    const { content } = await trx
      .selectFrom('artifacts')
      .select('content')
      .where('seq', '=', row.seq)
      .executeTakeFirstOrThrow();
    await sql`INSERT INTO artifact_fts (rowid, body) VALUES (${row.seq}, ${foldCase(String(content))})`.execute(trx);
    await trx.deleteFrom('fts_pending').where('seq', '=', row.seq).execute();
  }
  return (await trx.selectFrom('fts_pending').select('seq').limit(1).executeTakeFirst()) !== undefined;
}

/** Light columns of at most PAGE_ROWS rows, newest first, visible to the scope: those in `seqs`, or those older than it. */
async function rowsOf(db: Db, seqs: readonly number[] | number, scope: StoreScope | undefined): Promise<Candidate[]> {
  let q = db
    .selectFrom('artifacts as a')
    .select(['a.seq as seq', 'a.byte_count as bytes'])
    .where('a.seq', typeof seqs === 'number' ? '<' : 'in', seqs);
  if (scope !== undefined) q = q.where('a.artifact_id', 'in', accessibleIds(db, scope));
  return (await q.orderBy('a.seq', 'desc').limit(PAGE_ROWS).execute()).map((r) => ({
    seq: Number(r.seq),
    bytes: Number(r.bytes),
  }));
}

/**
 * The rows the index holds the needle's phrase in (its first INDEX_PHRASE_MAX code points), or
 * undefined when the needle is too short or the FTS parser refused the phrase (scan everything).
 */
async function indexHits(db: Db, needle: string): Promise<Set<number> | undefined> {
  const length = codePoints(needle);
  if (length < 3 || needle.includes('\u0000')) return undefined;
  const phrase = ftsPhrase([...needle].slice(0, INDEX_PHRASE_MAX).join(''));
  try {
    const hits = await sql<{
      rowid: number;
    }>`SELECT rowid FROM artifact_fts WHERE artifact_fts MATCH ${phrase}`.execute(db);
    return new Set(hits.rows.map((r) => Number(r.rowid)));
  } catch {
    return undefined; // the FTS parser refused the phrase: scan everything below
  }
}

/** The search's candidates in order, newest first, page by page; each decided by `consider` until it says stop. */
async function walkCandidates(
  db: Db,
  indexed: Set<number> | undefined,
  byTool: ReadonlySet<number>,
  scope: StoreScope | undefined,
  consider: (row: Candidate) => Promise<boolean>,
): Promise<void> {
  if (indexed !== undefined) {
    // Candidates: index hits, tool matches and rows not indexed yet, newest first.
    const pending = (await db.selectFrom('fts_pending').select('seq').execute()).map((r) => Number(r.seq));
    const all = [...new Set([...indexed, ...byTool, ...pending])].sort((a, b) => b - a);
    for (let i = 0; i < all.length; i += PAGE_ROWS) {
      for (const row of await rowsOf(db, all.slice(i, i + PAGE_ROWS), scope)) if (!(await consider(row))) return;
    }
    return;
  }
  let below = Number.MAX_SAFE_INTEGER;
  for (;;) {
    const page = await rowsOf(db, below, scope);
    if (page.length === 0) return;
    for (const row of page) if (!(await consider(row))) return;
    below = page[page.length - 1]!.seq;
  }
}

/** Search once the queue has been drained as far as the time allows (see the file's comment). */
async function searchIndexed(
  db: Db,
  needle: string,
  limit: number,
  bounds: SearchBounds,
): Promise<{ rows: ArtifactSummary[]; partial: boolean }> {
  const expired = (): boolean => bounds.clock() >= bounds.deadline;
  const indexed = await indexHits(db, needle);
  const exactByIndex = indexed !== undefined && codePoints(needle) <= INDEX_PHRASE_MAX;
  const named = (name: Expression<string>) => sql<boolean>`instr(${name}, ${needle}) > 0`;
  const toolRows = await db
    .selectFrom('artifacts as a')
    .select('a.seq as seq')
    .where('a.artifact_id', 'in', toolMatches(db, bounds.scope, named))
    .execute();
  const byTool = new Set(toolRows.map((r) => Number(r.seq)));

  const found: number[] = [];
  let scanned = 0;
  let partial = false;
  /** Decide one candidate; false when the search must stop (limit or deadline). */
  const consider = async (row: Candidate): Promise<boolean> => {
    if (found.length >= limit) return false;
    let hit = byTool.has(row.seq) || (exactByIndex && indexed!.has(row.seq));
    if (!hit) {
      if (expired()) {
        partial = true;
        return false;
      }
      const r = await db.selectFrom('artifacts').select('content').where('seq', '=', row.seq).executeTakeFirst();
      hit = r !== undefined && foldCase(String(r.content)).includes(needle);
      scanned += row.bytes;
      if (scanned >= SCAN_SLICE_BYTES) {
        scanned = 0;
        await yieldTurn();
      }
    }
    if (hit) found.push(row.seq);
    return found.length < limit;
  };
  await walkCandidates(db, indexed, byTool, bounds.scope, consider);
  if (found.length === 0) return { rows: [], partial };
  const rows = await selectSummaries(db, bounds.scope)
    .where('a.seq', 'in', found)
    .orderBy('a.created_at', 'desc')
    .orderBy('a.seq', 'desc')
    .execute();
  return { rows: rows.map(toSummary) as ArtifactSummary[], partial };
}

/** The search index of `store`; `background`: index queued rows while the process is idle. */
export function createSqliteSearch(store: SqliteStore<VaultDatabase>, background: boolean): SearchIndex {
  const { raw, db } = store;
  raw.function('tt_fold', { deterministic: true }, (s: unknown) => foldCase(String(s ?? '')));
  let closed = false;

  /** One step of indexing; never waits for another process's lock (busy: false, try later). */
  const indexStep = (): Promise<boolean> =>
    store.write((trx) => indexBatch(trx, INDEX_STEP_BYTES), { remainingMs: 0 }).catch(() => false);

  /** One idle step; it queues the next while the queue has rows. */
  const idleStep = (): void => {
    if (closed) return;
    // Busy or failing: leave the queue; the next put reschedules, and search scans it anyway.
    void indexStep().then((more) => more && schedule());
  };
  /** Index when the process is idle (no reduction in flight, the store quiet): see src/vault/idle.ts. */
  const schedule = (): void => {
    if (closed || !background) return;
    store.idle?.defer(idleStep);
  };

  return {
    async added(trx, seq) {
      await queueForIndex.execute(store, trx, seq);
    },
    async removing(trx, seqs) {
      for (const seq of seqs) await sql`DELETE FROM artifact_fts WHERE rowid = ${seq}`.execute(trx);
    },
    async search(needle, limit, bounds) {
      // Index what is queued, a step at a time, for at most half of the time left.
      const drainUntil = bounds.clock() + (bounds.deadline - bounds.clock()) / 2;
      while (bounds.clock() < drainUntil && (await indexStep())) await yieldTurn();
      return searchIndexed(db, needle, limit, bounds);
    },
    afterPut: schedule,
    close() {
      closed = true;
    },
  };
}
