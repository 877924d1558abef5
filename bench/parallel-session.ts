/**
 * A generated agent session whose assistant messages carry several tool calls (parallel calls, as
 * Claude Code issues them) with the results arriving in a shuffled order, and its single-call twin
 * of the same size: the same turns, the same output text per turn (split over the calls), the
 * same assistant text. Deterministic: one seed always gives the same session. Used by
 * `bench compile` and `bench replay` to set a parallel-call session's time per request beside a
 * single-call session's in the same run.
 */
import { prng } from '../src/prng.js';
import { parallelTurn } from '../test/support/parallel-turn.js';

type Msg = Record<string, unknown>;

/** Wire formats the benches send: Chat Completions messages, or Anthropic Messages content blocks. */
export type SessionFormat = 'chat' | 'anthropic';

export interface CallsSessionOptions {
  /** Model turns (requests). */
  readonly turns: number;
  /** Tool calls per assistant message (1: the single-call twin). */
  readonly calls: number;
  /** PRNG seed (sizes, modules, result order). Default 34. */
  readonly seed?: number;
  /** Appended to every output line: a bench session's own outputs. */
  readonly run?: string;
  /** Default `chat`. */
  readonly format?: SessionFormat;
}

export interface CallsSession {
  /** The request's other fields (model; Anthropic: the system prompt, max_tokens). */
  readonly top: Readonly<Msg>;
  readonly messages: readonly Msg[];
  /** After each turn's results, the number of messages a request holds (one request per turn). */
  readonly ends: readonly number[];
}

/** The lines one turn's calls return together (a listing-and-grep shape, sizes drawn from `next`). */
function turnLines(t: number, next: () => number, run: string): string[] {
  const n = next() < 0.15 ? 300 + Math.floor(next() * 200) : 30 + Math.floor(next() * 60);
  const module = Math.floor(next() * 13);
  return Array.from(
    { length: n },
    (_, i) => `src/module_${module}/file_${i}.ts:${i + t}: const value_${i} = compute(${t}, ${i}); // turn ${t}${run}`,
  );
}

/** Split `lines` over `k` calls, in order (each part is one call's output). */
function split(lines: readonly string[], k: number): string[] {
  const per = Math.ceil(lines.length / k);
  return Array.from({ length: k }, (_, j) => lines.slice(j * per, (j + 1) * per).join('\n') || '(no matches)');
}

/** A shuffled copy of 0..k-1 (the order the results arrive in). */
function arrival(k: number, next: () => number): number[] {
  const order = Array.from({ length: k }, (_, j) => j);
  for (let i = k - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  return order;
}

/**
 * One session of `turns` model turns, each an assistant message with `calls` calls and their
 * results (shuffled when `calls` > 1).
 *
 * @example
 * const { messages, ends } = callsSession({ turns: 200, calls: 3 }); // request t holds messages.slice(0, ends[t])
 */
export function callsSession(o: CallsSessionOptions): CallsSession {
  const next = prng(o.seed ?? 34);
  const format = o.format ?? 'chat';
  const run = o.run ?? '';
  const system = 'You are a careful coding agent. Use the tools; call several at once when they are independent.';
  const task = { role: 'user', content: 'Fix the failing build and explain the cause.' };
  const anthropic = format === 'anthropic';
  const top = anthropic ? { model: 'claude-sonnet-4-5', max_tokens: 4096, system } : { model: 'gpt-4o' };
  const messages: Msg[] = anthropic ? [task] : [{ role: 'system', content: system }, task];
  const ends: number[] = [];
  for (let t = 0; t < o.turns; t++) {
    const parts = split(turnLines(t, next, run), o.calls);
    const order = arrival(o.calls, next);
    const ids = parts.map((_, j) => `call_${t}_${j}`);
    const names = parts.map((_, j) => ((t + j) % 2 === 0 ? 'search_files' : 'read_file'));
    const args = parts.map((_, j) => ({ path: `src/module_${(t + j) % 13}` }));
    const text = `Step ${t}: looking at module ${t % 13}.`;
    const calls = ids.map((id, j) => ({ id, name: names[j]!, input: args[j]! }));
    messages.push(
      ...parallelTurn(
        anthropic,
        text,
        calls,
        order.map((j) => ({ id: ids[j]!, content: parts[j]! })),
      ),
    );
    ends.push(messages.length);
  }
  return { top, messages, ends };
}
