/**
 * A small, bounded working-state graph per session, in the vault's `working_state_*` tables. Unlike
 * the reference (one global graph), one session cannot read or overwrite another's state, and caps
 * apply per session; rendering into requests and event replay are not implemented here.
 */
import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { TokenTerminatorError } from '../errors.js';
import { canonicalJson } from '../measure/canonical-json.js';
import type { StoreContext } from './context.js';
import type { WorkingStateStore } from './ports.js';
import type { VaultDatabase } from './schema.js';

/** A batch that cannot be applied; nothing of it was written. */
export class WorkingStateError extends TokenTerminatorError {
  constructor(message: string) {
    super('E_WORKING_STATE_INVALID', message);
  }
}

/** Per-session caps. */
export interface WorkingStateLimits {
  /** Most nodes per session, retired ones included. Default 1000. */
  readonly maxNodes?: number;
  /** Most edges per session, retired ones included. Default 2000. */
  readonly maxEdges?: number;
  /** Most events per session. Default 100,000. */
  readonly maxEvents?: number;
}

type Entity = Record<string, unknown> & { status: 'active' | 'retired'; created_seq: number; updated_seq: number };
type Kind = 'node' | 'edge';

const SCORE_FIELDS = ['confidence', 'priority', 'uncertainty', 'activation'] as const;
const NODE_FIELDS = ['kind', 'label', 'content', ...SCORE_FIELDS, 'metadata'] as const;
const EDGE_FIELDS = ['kind', 'source', 'target', 'confidence', 'metadata'] as const;
const SCORES: ReadonlySet<string> = new Set(SCORE_FIELDS);
const CONTROL = /[\u0000-\u001f\u007f]/;

function identifier(value: unknown, where: string): string {
  if (typeof value !== 'string') throw new WorkingStateError(`${where} must be a string`);
  const s = value.trim();
  if (s === '' || s.length > 256 || CONTROL.test(s)) {
    throw new WorkingStateError(`${where} must be 1–256 characters without control characters`);
  }
  return s;
}

function field(name: string, value: unknown, where: string): unknown {
  if (SCORES.has(name)) {
    if (value === null) return null;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > 1) {
      throw new WorkingStateError(`${where}.${name} must be a number in [0, 1] or null`);
    }
    return value;
  }
  if (name === 'label' || name === 'content') {
    const max = name === 'label' ? 2000 : 20000;
    if (typeof value !== 'string' || value.length > max)
      throw new WorkingStateError(`${where}.${name} must be a string of at most ${max} characters`);
    return value;
  }
  if (name === 'metadata') {
    if (value === null || typeof value !== 'object' || Array.isArray(value) || canonicalJson(value).length > 20000) {
      throw new WorkingStateError(`${where}.metadata must be an object of at most 20000 serialized characters`);
    }
    return JSON.parse(JSON.stringify(value)) as unknown;
  }
  return identifier(value, `${where}.${name}`);
}

async function loadState(db: Kysely<VaultDatabase>, sessionId: string): Promise<Map<string, Entity>> {
  const state = new Map<string, Entity>();
  const rows = await db
    .selectFrom('working_state_entities')
    .select(['entity', 'id', 'body', 'active', 'created_seq', 'updated_seq'])
    .where('session_id', '=', sessionId)
    .execute();
  for (const row of rows) {
    const body = JSON.parse(row.body) as Record<string, unknown>;
    state.set(`${row.entity}:${row.id}`, {
      ...body,
      status: Number(row.active) ? 'active' : 'retired',
      created_seq: Number(row.created_seq),
      updated_seq: Number(row.updated_seq),
    });
  }
  return state;
}

const OPS = 'NODE_CREATE, NODE_UPDATE, NODE_RETIRE, EDGE_CREATE, EDGE_UPDATE, EDGE_RETIRE, PROPOSITION_CREATE';

/**
 * Check one raw operation (its shape, op, fields and ids) before it touches the state; `assertNew`
 * rejects an event id already used, checked before the entity id and the fields.
 */
async function parseOperation(
  raw: Readonly<Record<string, unknown>>,
  index: number,
  assertNew: (eventId: string, where: string) => Promise<void>,
) {
  const where = `operations[${index}]`;
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    throw new WorkingStateError(`${where} must be an object`);
  if (canonicalJson(raw).length > 50_000)
    throw new WorkingStateError(`${where} is larger than 50000 serialized characters`);
  let op = typeof raw['op'] === 'string' ? raw['op'].trim().toUpperCase() : '';
  const input: Record<string, unknown> = { ...raw };
  if (op === 'PROPOSITION_CREATE') {
    op = 'NODE_CREATE';
    input['kind'] ??= 'proposition';
  }
  const entity: Kind | undefined = op.startsWith('NODE_') ? 'node' : op.startsWith('EDGE_') ? 'edge' : undefined;
  const verb = op.slice(5);
  if (entity === undefined || !['CREATE', 'UPDATE', 'RETIRE'].includes(verb))
    throw new WorkingStateError(`${where}.op must be one of ${OPS}`);
  const idField = `${entity}_id`;
  const names = entity === 'node' ? NODE_FIELDS : EDGE_FIELDS;
  const allowed = new Set(['op', 'event_id', idField, ...(verb === 'RETIRE' ? [] : names)]);
  for (const key of Object.keys(input))
    if (!allowed.has(key)) throw new WorkingStateError(`${where}: unknown field ${key} for ${op}`);
  const eventId =
    input['event_id'] === undefined
      ? `evt_${randomUUID().replace(/-/g, '')}`
      : identifier(input['event_id'], `${where}.event_id`);
  await assertNew(eventId, where);
  const id = identifier(input[idField], `${where}.${idField}`);
  const fields: Record<string, unknown> = {};
  for (const name of names) {
    if (input[name] !== undefined) fields[name] = field(name, input[name], where);
  }
  return { where, op, input, entity, verb, idField, eventId, id, fields };
}

/** One operation of a batch, checked: its verb, entity, id and the fields it sets. */
type Operation = Awaited<ReturnType<typeof parseOperation>>;

/** A session's state as a batch changes it, and the entities the batch touched (to write back). */
class Changes {
  readonly touched = new Map<string, Entity>();

  constructor(
    readonly state: Map<string, Entity>,
    private readonly caps: Required<WorkingStateLimits>,
  ) {}

  /** Apply one checked operation as event `seq`. */
  apply(o: Operation, seq: number): void {
    const { where, op, entity, id, fields } = o;
    const key = `${entity}:${id}`;
    const current = this.state.get(key);
    if (o.verb === 'CREATE') {
      if (current !== undefined) throw new WorkingStateError(`${where}: ${entity} ${id} already exists`);
      if (fields['kind'] === undefined) throw new WorkingStateError(`${where}.kind is required for ${op}`);
      if (entity === 'edge') {
        if (fields['source'] === undefined || fields['target'] === undefined)
          throw new WorkingStateError(`${where}: source and target are required`);
        this.activeEnds(fields, where);
      }
      const max = entity === 'node' ? this.caps.maxNodes : this.caps.maxEdges;
      if ([...this.state.keys()].filter((k) => k.startsWith(`${entity}:`)).length >= max)
        throw new WorkingStateError(`${where}: more than ${max} ${entity}s`);
      this.put(key, { [o.idField]: id, ...fields, status: 'active', created_seq: seq, updated_seq: seq });
      return;
    }
    if (current?.status !== 'active') throw new WorkingStateError(`${where}: ${entity} ${id} is not active`);
    if (o.verb === 'UPDATE') {
      if (Object.keys(fields).length === 0)
        throw new WorkingStateError(`${where}: ${op} needs at least one field to change`);
      const next: Entity = { ...current, ...fields, updated_seq: seq };
      if (entity === 'edge') this.activeEnds(next, where);
      this.put(key, next);
      return;
    }
    this.put(key, { ...current, status: 'retired', updated_seq: seq });
    if (entity === 'node') {
      for (const [k, e] of this.state) {
        if (k.startsWith('edge:') && e.status === 'active' && (e['source'] === id || e['target'] === id))
          this.put(k, { ...e, status: 'retired', updated_seq: seq });
      }
    }
  }

  private put(key: string, entity: Entity): void {
    this.state.set(key, entity);
    this.touched.set(key, entity);
  }

  /** Both ends of an edge must be active nodes. */
  private activeEnds(edge: Record<string, unknown>, where: string): void {
    for (const id of [edge['source'], edge['target']]) {
      const node = this.state.get(`node:${String(id)}`);
      if (node?.status !== 'active') throw new WorkingStateError(`${where}: node ${String(id)} is not an active node`);
    }
  }

  counts(events: number): Record<string, number> {
    const n = { nodes: 0, edges: 0, active_nodes: 0, active_edges: 0, events };
    for (const [k, e] of this.state) {
      const kind = k.startsWith('node:') ? 'nodes' : 'edges';
      n[kind] += 1;
      if (e.status === 'active') n[`active_${kind}`] += 1;
    }
    return n;
  }
}

async function writeEntities(
  trx: Kysely<VaultDatabase>,
  sessionId: string,
  touched: ReadonlyMap<string, Entity>,
): Promise<void> {
  for (const [key, e] of touched) {
    const { status, created_seq, updated_seq, ...body } = e;
    await trx
      .insertInto('working_state_entities')
      .values({
        session_id: sessionId,
        entity: key.slice(0, 4),
        id: key.slice(5),
        body: canonicalJson(body, { compact: true }),
        active: status === 'active' ? 1 : 0,
        created_seq,
        updated_seq,
      })
      .onConflict((oc) =>
        oc.columns(['session_id', 'entity', 'id']).doUpdateSet((eb) => ({
          body: eb.ref('excluded.body'),
          active: eb.ref('excluded.active'),
          updated_seq: eb.ref('excluded.updated_seq'),
        })),
      )
      .execute();
  }
}

/** Apply a batch of operations to a session's state in one transaction: all of it or nothing. */
async function applyBatch(
  trx: Kysely<VaultDatabase>,
  nowIso: () => string,
  limits: Required<WorkingStateLimits>,
  sessionId: string,
  operations: readonly Readonly<Record<string, unknown>>[],
): Promise<Readonly<Record<string, unknown>>> {
  const changes = new Changes(await loadState(trx, sessionId), limits);
  const events: { id: string; payload: string }[] = [];
  const assertNew = async (eventId: string, where: string): Promise<void> => {
    const taken = await trx
      .selectFrom('working_state_events')
      .select('seq')
      .where('event_id', '=', eventId)
      .executeTakeFirst();
    if (taken !== undefined || events.some((e) => e.id === eventId))
      throw new WorkingStateError(`${where}: duplicate event_id ${eventId}`);
  };
  const last = await trx
    .selectFrom('working_state_events')
    .select((eb) => eb.fn.max('seq').as('s'))
    .executeTakeFirst();
  let seq = Number(last?.s ?? 0);
  for (const [index, raw] of operations.entries()) {
    const o = await parseOperation(raw, index, assertNew);
    seq += 1;
    changes.apply(o, seq);
    const payload = { ...o.input, op: o.op, event_id: o.eventId, [o.idField]: o.id, ...o.fields };
    events.push({ id: o.eventId, payload: canonicalJson(payload, { compact: true }) });
  }
  const existing = await trx
    .selectFrom('working_state_events')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('session_id', '=', sessionId)
    .executeTakeFirstOrThrow();
  const existingEvents = Number(existing.n);
  if (existingEvents + events.length > limits.maxEvents)
    throw new WorkingStateError(`more than ${limits.maxEvents} working-state events in this session`);
  const now = nowIso();
  if (events.length > 0) {
    await trx
      .insertInto('working_state_events')
      .values(events.map((e) => ({ event_id: e.id, session_id: sessionId, payload: e.payload, created_at: now })))
      .execute();
  }
  await writeEntities(trx, sessionId, changes.touched);
  const ids = events.map((e) => e.id);
  return { accepted: events.length, event_ids: ids, counts: changes.counts(existingEvents + events.length) };
}

export function createWorkingState(ctx: StoreContext, limits: WorkingStateLimits = {}): WorkingStateStore {
  const caps: Required<WorkingStateLimits> = {
    maxNodes: limits.maxNodes ?? 1000,
    maxEdges: limits.maxEdges ?? 2000,
    maxEvents: limits.maxEvents ?? 100_000,
  };
  const { conn } = ctx;
  const byRecency = ([ka, a]: [string, Entity], [kb, b]: [string, Entity]) =>
    b.updated_seq - a.updated_seq || (ka < kb ? -1 : ka > kb ? 1 : 0);
  return {
    async apply(sessionId, operations) {
      return conn.write((trx) => applyBatch(trx, () => ctx.nowIso(), caps, sessionId, operations));
    },
    async get(sessionId, { includeRetired, limit }) {
      const state = [...(await loadState(conn.db, sessionId)).entries()];
      /** The newest `limit` entities of a kind (`node:` or `edge:`) that `shown` lets through, by id. */
      const newest = (kind: string, shown: (e: Entity) => boolean): [string, Entity][] =>
        state
          .filter(([k, e]) => k.startsWith(kind) && (includeRetired || e.status === 'active') && shown(e))
          .sort(byRecency)
          .slice(0, limit)
          .map(([k, e]) => [k.slice(5), e]);
      const nodes = newest('node:', () => true);
      const visible = new Set(nodes.map(([id]) => id));
      const edges = newest('edge:', (e) => visible.has(String(e['source'])) && visible.has(String(e['target'])));
      return { nodes: Object.fromEntries(nodes), edges: Object.fromEntries(edges) };
    },
  };
}
