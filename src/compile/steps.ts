/**
 * Steps and block boundaries: the unit of compaction and of prompt-cache policy.
 *
 * A step is one model round: it starts at a user message that carries text (or images), or at an
 * assistant item that follows tool results, and it owns the tool results that follow. Leading
 * system/developer items form the head and belong to no step. Chat, Responses and Anthropic
 * requests segment the same way because the model reports every item's coarse role.
 */
import type { ItemInfo } from '../model/types.js';

export interface Steps {
  /** Index of the first item after the leading system/developer head. */
  readonly headEnd: number;
  /** Item index where each step starts. */
  readonly starts: readonly number[];
  /** Runs of assistant items: the requests so far in the conversation. */
  readonly runs: number;
  /** Items segmented. */
  readonly length: number;
}

/** Segment items into steps, going on from `from`, the steps of a leading run of them (its `starts` extended in place). */
export function segmentSteps(info: readonly ItemInfo[], from?: Steps): Steps {
  const carried = from !== undefined && from.headEnd < from.length && from.length <= info.length;
  let headEnd = carried ? from.headEnd : 0;
  while (headEnd < info.length && info[headEnd]!.role === 'system') headEnd++;
  const starts = carried ? (from.starts as number[]) : [];
  let runs = carried ? from.runs : 0;
  for (let i = carried ? from.length : headEnd; i < info.length; i++) {
    const cur = info[i]!;
    const prev = i > headEnd ? info[i - 1]! : undefined;
    const start = prev === undefined || cur.userText || (cur.role === 'assistant' && prev.role === 'tool');
    if (start) starts.push(i);
    if (cur.role === 'assistant' && prev?.role !== 'assistant') runs++;
  }
  return { headEnd, starts, runs, length: info.length };
}

/**
 * Steps [0, sealed) of a request with `stepCount` steps: old, their large tool outputs may become
 * receipts, all but the newest `inlineRecentSteps`. Moves only in whole blocks of `blockSteps`, so
 * between two boundaries every older item renders exactly as before (prompt-cache stability).
 */
export function sealedSteps(stepCount: number, blockSteps: number, inlineRecentSteps: number): number {
  const b = Math.max(1, blockSteps);
  const n = stepCount - inlineRecentSteps;
  return n > 0 ? Math.floor(n / b) * b : 0;
}
