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
  /** Step index of each item (-1 for head items). */
  readonly stepOf: readonly number[];
}

/** Segment a conversation's items into steps. */
export function segmentSteps(info: readonly ItemInfo[]): Steps {
  let headEnd = 0;
  while (headEnd < info.length && info[headEnd]!.role === 'system') headEnd++;
  const starts: number[] = [];
  const stepOf: number[] = new Array<number>(info.length).fill(-1);
  for (let i = headEnd; i < info.length; i++) {
    const cur = info[i]!;
    const prev = i > headEnd ? info[i - 1]! : undefined;
    const start = prev === undefined || cur.userText || (cur.role === 'assistant' && prev.role === 'tool');
    if (start) starts.push(i);
    stepOf[i] = starts.length - 1;
  }
  return { headEnd, starts, stepOf };
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
