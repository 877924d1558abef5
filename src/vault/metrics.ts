/**
 * The metrics port: one content-free row per (session, request) with its per-component token
 * counts, and the sums the `stats` command prints.
 */
import { stageId } from '../stages.js';
import { canonicalJson } from '../measure/canonical-json.js';
import { label, requireCount, type StoreContext } from './context.js';
import { VaultArgumentError } from './errors.js';
import type { MetricsStore, StoreScope } from './ports.js';
import type { MetricsSummary, RequestMetric, RequestMetricRow } from './types.js';

/**
 * (raw − final) / raw × 100, rounded to 2 decimals; 0 when raw is 0.
 *
 * @example
 * reductionPct(2000, 500); // 75
 * reductionPct(0, 0); // 0
 */
export function reductionPct(raw: number, final: number): number {
  return raw <= 0 ? 0 : Math.round(((raw - final) / raw) * 10_000) / 100;
}

/** Rows per statement of a batch: well under every engine's bound-parameter limit. */
const ROWS_PER_STATEMENT = 200;

type Db = StoreContext['conn']['db'];

/** Columns a later write of the same (session, request) keeps: the key and the first write's time. */
const KEPT: ReadonlySet<string> = new Set(['session_id', 'request_id', 'created_at']);

/** The rows of a batch, the later of two rows of one (session, request) kept, checked and labelled. */
function metricRows(ctx: StoreContext, metrics: readonly RequestMetric[]) {
  const latest = new Map<string, RequestMetric>();
  for (const m of metrics) {
    if (typeof m?.sessionId !== 'string' || typeof m.requestId !== 'string') {
      throw new VaultArgumentError('recordRequestMetric: sessionId and requestId must be strings');
    }
    const key = `${m.sessionId}\u0000${m.requestId}`;
    latest.delete(key);
    latest.set(key, m);
  }
  const now = ctx.nowIso();
  const rows = [...latest.values()].map((m) => ({
    session_id: m.sessionId,
    request_id: m.requestId,
    mode: label(ctx, m.mode),
    model: m.model === undefined ? null : label(ctx, m.model),
    raw_chars: requireCount('rawChars', m.rawChars),
    final_chars: requireCount('finalChars', m.finalChars),
    raw_tokens: m.rawTokens === undefined ? null : requireCount('rawTokens', m.rawTokens),
    final_tokens: m.finalTokens === undefined ? null : requireCount('finalTokens', m.finalTokens),
    tokenizer: m.tokenizer === undefined ? null : label(ctx, m.tokenizer),
    receipts: requireCount('receipts', m.receipts),
    failed_open: m.failedOpen ? 1 : 0,
    saved_by_stage_json: canonicalJson(m.savedByStage ?? {}, { compact: true }),
    created_at: now,
    updated_at: now,
  }));
  const components = [...latest.values()].flatMap((m) =>
    Object.entries(m.components ?? {}).map(([component, v]) => ({
      session_id: m.sessionId,
      request_id: m.requestId,
      component: label(ctx, component),
      raw_tokens: requireCount('raw', v.raw),
      final_tokens: requireCount('final', v.final),
    })),
  );
  return { rows, components };
}

/** Upsert the rows in statements of ROWS_PER_STATEMENT; a row's components are replaced whole. */
async function writeMetricRows(trx: Db, { rows, components }: ReturnType<typeof metricRows>): Promise<void> {
  for (let i = 0; i < rows.length; i += ROWS_PER_STATEMENT) {
    const part = rows.slice(i, i + ROWS_PER_STATEMENT);
    await trx
      .insertInto('request_metrics')
      .values(part)
      .onConflict((oc) =>
        oc.columns(['session_id', 'request_id']).doUpdateSet((eb) => {
          const replaced = Object.keys(part[0]!).filter((c) => !KEPT.has(c)) as (keyof (typeof part)[0])[];
          return Object.fromEntries(replaced.map((c) => [c, eb.ref(`excluded.${c}`)]));
        }),
      )
      .execute();
    // Those of an earlier write of the same request go first.
    await trx
      .deleteFrom('request_component_metrics')
      .where((eb) =>
        eb.or(part.map((r) => eb.and([eb('session_id', '=', r.session_id), eb('request_id', '=', r.request_id)]))),
      )
      .execute();
  }
  for (let i = 0; i < components.length; i += ROWS_PER_STATEMENT) {
    await trx
      .insertInto('request_component_metrics')
      .values(components.slice(i, i + ROWS_PER_STATEMENT))
      .execute();
  }
}

/** Token sums per component, with each one's share of the raw tokens. */
async function componentSums(db: Db): Promise<MetricsSummary['components']> {
  const rows = await db
    .selectFrom('request_component_metrics')
    .select((eb) => [
      'component',
      eb.fn.sum<number>('raw_tokens').as('raw'),
      eb.fn.sum<number>('final_tokens').as('final'),
    ])
    .groupBy('component')
    .orderBy('component')
    .execute();
  const rawSum = rows.reduce((x, r) => x + Number(r.raw), 0);
  const components: Record<string, { raw_tokens: number; final_tokens: number; raw_pct: number }> = {};
  for (const r of rows)
    components[r.component] = {
      raw_tokens: Number(r.raw),
      final_tokens: Number(r.final),
      raw_pct: reductionPct(rawSum, rawSum - Number(r.raw)),
    };
  return components;
}

async function modeSums(db: Db): Promise<MetricsSummary['by_mode']> {
  const modes = await db
    .selectFrom('request_metrics')
    .select((eb) => [
      'mode',
      eb.fn.countAll<number>().as('n'),
      eb.fn.coalesce(eb.fn.sum<number>('raw_tokens'), eb.lit(0)).as('raw'),
      eb.fn.coalesce(eb.fn.sum<number>('final_tokens'), eb.lit(0)).as('final'),
    ])
    .groupBy('mode')
    .orderBy('mode')
    .execute();
  return Object.fromEntries(
    modes.map((r) => [r.mode, { requests: Number(r.n), raw_tokens: Number(r.raw), final_tokens: Number(r.final) }]),
  );
}

/** The columns the summary sums over every row. */
const SUMMED = ['raw_chars', 'final_chars', 'raw_tokens', 'final_tokens', 'receipts', 'failed_open'] as const;

async function metricsSummary(db: Db): Promise<MetricsSummary> {
  const t = await db
    .selectFrom('request_metrics')
    .select((eb) => [
      eb.fn.countAll<number>().as('requests'),
      eb.fn.count<number>('session_id').distinct().as('sessions'),
      ...SUMMED.map((c) => eb.fn.coalesce(eb.fn.sum<number>(c), eb.lit(0)).as(c)),
    ])
    .executeTakeFirstOrThrow();
  const saved: Record<string, number> = {};
  for (const row of await db.selectFrom('request_metrics').select('saved_by_stage_json as j').execute()) {
    for (const [stage, chars] of Object.entries(stageNumbers(row.j))) saved[stage] = (saved[stage] ?? 0) + chars;
  }
  const n = (v: unknown): number => Number(v ?? 0);
  return {
    requests: n(t.requests),
    sessions: n(t.sessions),
    raw_chars: n(t.raw_chars),
    final_chars: n(t.final_chars),
    raw_tokens: n(t.raw_tokens),
    final_tokens: n(t.final_tokens),
    reduction_pct: reductionPct(n(t.raw_tokens), n(t.final_tokens)),
    receipts: n(t.receipts),
    failed_open_requests: n(t.failed_open),
    saved_by_stage: saved,
    components: await componentSums(db),
    by_mode: await modeSums(db),
  };
}

async function requestMetricRows(db: Db, limit: number): Promise<readonly RequestMetricRow[]> {
  const n = requireCount('limit', limit, 1);
  const rows = await db
    .selectFrom('request_metrics')
    .selectAll()
    .orderBy('created_at', 'desc')
    .orderBy('session_id', 'desc')
    .orderBy('request_id', 'desc')
    .limit(n)
    .execute();
  return rows.reverse().map((r) => ({
    sessionId: r.session_id,
    requestId: r.request_id,
    mode: r.mode,
    rawChars: Number(r.raw_chars),
    finalChars: Number(r.final_chars),
    ...(r.raw_tokens === null ? {} : { rawTokens: Number(r.raw_tokens) }),
    ...(r.final_tokens === null ? {} : { finalTokens: Number(r.final_tokens) }),
    receipts: Number(r.receipts),
    failedOpen: Number(r.failed_open) !== 0,
    savedByStage: stageNumbers(r.saved_by_stage_json),
  }));
}

export function createMetricsStore(ctx: StoreContext): MetricsStore {
  const { conn } = ctx;

  /** Upsert many rows in one transaction; a (session, request) given twice keeps the later row, as two calls would. */
  const recordRequestMetrics = async (metrics: readonly RequestMetric[], scope?: StoreScope): Promise<void> => {
    if (metrics.length === 0) return;
    const batch = metricRows(ctx, metrics);
    await conn.write((trx) => writeMetricRows(trx, batch), scope?.budget);
  };

  return {
    recordRequestMetric: (m: RequestMetric, scope?: StoreScope): Promise<void> => recordRequestMetrics([m], scope),
    recordRequestMetrics,
    metricsSummary: () => metricsSummary(conn.db),
    requestMetricRows: (limit = 10_000) => requestMetricRows(conn.db, limit),
  };
}

/** Saved chars per stage from a row's JSON; a row another writer left malformed contributes none. */
function stageNumbers(json: string): Record<string, number> {
  const out: Record<string, number> = {};
  try {
    for (const [k, v] of Object.entries(JSON.parse(json) as Record<string, unknown>)) {
      const stage = stageId(k); // rows written before the ids were unified
      if (typeof v === 'number') out[stage] = (out[stage] ?? 0) + v;
    }
  } catch {
    // nothing to add
  }
  return out;
}
