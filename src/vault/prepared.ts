/**
 * Statements the request path runs again and again, built and compiled by kysely once per connection
 * and shape (which costs more than running them on SQLite): each execution puts its arguments into the
 * compiled parameters where the placeholders were. Only fixed shapes fit: a value the builder inspects
 * (an IN list's length, `= null` becoming `is null`) would be another query.
 */
import type { Compilable, CompiledQuery, Kysely, QueryResult } from 'kysely';

/** Where an argument goes in the compiled parameters. */
class Placeholder {
  constructor(readonly index: number) {}
}

interface Template {
  readonly compiled: CompiledQuery;
  /** [parameter position, argument index] of every placeholder. */
  readonly slots: readonly (readonly [number, number])[];
}

/** What a statement is compiled for: a store connection (its root kysely instance keys the memo). */
interface Connection {
  readonly db: object;
}

type DatabaseOf<C> = C extends { readonly db: Kysely<infer DB> } ? DB : never;

/** One statement shape, compiled once per connection. */
export interface PreparedStatement<C extends Connection, A extends readonly unknown[], R> {
  /** Run it on `db`: the connection's kysely instance or a transaction of it (`trx`). */
  execute(conn: C, db: Kysely<DatabaseOf<C>>, ...args: A): Promise<QueryResult<R>>;
  /** The first row, or undefined. */
  first(conn: C, db: Kysely<DatabaseOf<C>>, ...args: A): Promise<R | undefined>;
  /** The compiled SQL and parameters for `conn` (tests and diagnostics). */
  compile(conn: C, ...args: A): CompiledQuery<R>;
}

/**
 * A statement built once per connection by `build(conn, ...args)`, whose arguments only ever become
 * parameters (session-state.ts's `renderingOf` is a small one). `conn` is there for the dialect's
 * clauses (`conn.lock`): the compiled SQL belongs to that connection, never used on another one.
 */
export function prepared<C extends Connection, A extends readonly unknown[], R>(
  build: (conn: C, ...args: A) => Compilable<R>,
  /** How many arguments (default: the builder's declared parameters after `conn`). */
  arity = build.length - 1,
): PreparedStatement<C, A, R> {
  // Per connection: a WeakMap lets a closed connection's templates go with it.
  const templates = new WeakMap<object, Template>();
  const templateFor = (conn: C): Template => {
    let template = templates.get(conn.db);
    if (template !== undefined) return template;
    const placeholders = Array.from({ length: arity }, (_, i) => new Placeholder(i));
    const compiled = build(conn, ...(placeholders as unknown as A)).compile() as CompiledQuery;
    const slots: [number, number][] = [];
    compiled.parameters.forEach((p, at) => {
      if (p instanceof Placeholder) slots.push([at, p.index]);
    });
    // An argument that did not become a parameter was inspected by the builder: not one shape.
    const used = new Set(slots.map(([, i]) => i));
    if (used.size !== arity) throw new Error(`prepared statement: an argument is not a parameter of ${compiled.sql}`);
    template = { compiled, slots };
    templates.set(conn.db, template);
    return template;
  };
  const compile = (conn: C, args: A): CompiledQuery<R> => {
    const { compiled, slots } = templateFor(conn);
    const parameters = [...compiled.parameters];
    for (const [at, i] of slots) parameters[at] = args[i];
    return { query: compiled.query, queryId: compiled.queryId, sql: compiled.sql, parameters };
  };
  const execute = (conn: C, db: Kysely<DatabaseOf<C>>, args: A): Promise<QueryResult<R>> =>
    db.executeQuery(compile(conn, args));
  return {
    execute: (conn, db, ...args) => execute(conn, db, args),
    first: async (conn, db, ...args) => (await execute(conn, db, args)).rows[0],
    compile: (conn, ...args) => compile(conn, args),
  };
}

/** Most rows a statement of {@link preparedRows} is prepared for; longer ones are built anew. */
export const PREPARED_ROWS_MAX = 16;

/** A statement whose shape depends on a row count `n` (an IN list, a multi-row insert). */
export interface PreparedRows<C extends Connection, A extends readonly unknown[], R> {
  execute(conn: C, db: Kysely<DatabaseOf<C>>, n: number, ...args: A): Promise<QueryResult<R>>;
}

/**
 * One prepared statement per row count up to {@link PREPARED_ROWS_MAX} (a request's few rows),
 * and the query built anew beyond it (long batches are rare, and one template per length would
 * crowd the connection's statement cache). `arity(n)`: how many arguments `n` rows take.
 */
export function preparedRows<C extends Connection, A extends readonly unknown[], R>(
  build: (conn: C, n: number, ...args: A) => Compilable<R>,
  arity: (n: number) => number,
): PreparedRows<C, A, R> {
  const byCount: PreparedStatement<C, A, R>[] = [];
  return {
    execute(conn, db, n, ...args) {
      if (n > PREPARED_ROWS_MAX) return db.executeQuery(build(conn, n, ...args).compile());
      const statement = (byCount[n] ??= prepared((c: C, ...a: A) => build(c, n, ...a), arity(n)));
      return statement.execute(conn, db, ...args);
    },
  };
}
