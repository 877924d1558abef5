/**
 * Text-protocol agents (mini-swe-agent, SWE-agent without function calling) return command output
 * in user-role messages. Such a message is treated as a tool output only when it is recognised:
 * by the host's own mapping (a predicate an adapter passes), or by a documented, configurable
 * pattern (TOKEN_TERMINATOR_OBSERVATION_PATTERN, default in src/config/observation-pattern.ts).
 * Never by size alone, and never inside the instruction prefix (before the first assistant item).
 */
import { DEFAULT_OBSERVATION_PATTERN } from '../config/observation-pattern.js';
import { ConfigError } from '../errors.js';
import type { RequestView, Slot } from '../model/types.js';
import { isRecoveryResult } from '../receipts/recovery-results.js';
import { fencedBlocks } from './actions.js';
import { WeakMemo } from '../weak-memo.js';
import { viewExtends } from '../model/read.js';

/** Decides whether a user message (its text, the item, its index) carries command output. */
export type ObservationTest = (text: string, item: unknown, index: number) => boolean;

/** What an operator option may be: a pattern source, a RegExp, a predicate, or `'none'`. */
export type ObservationSetting = string | RegExp | ObservationTest;

/** Marks the tests that depend on the text alone (patterns): their answer is remembered per message object. */
const BY_TEXT = Symbol('observation test by text');
const byText = (test: ObservationTest): boolean => (test as { [BY_TEXT]?: true })[BY_TEXT] === true;

/**
 * Build the test once (a bad pattern is a ConfigError naming the API).
 *
 * @example
 * const isOutput = observationTest('compileRequest', undefined); // the default pattern
 * isOutput('<returncode>1</returncode>\n<output>\nboom\n</output>', {}, 5); // true
 */
export function observationTest(api: string, setting: ObservationSetting | undefined): ObservationTest {
  if (typeof setting === 'function') return setting;
  if (setting === 'none') return () => false;
  let re: RegExp;
  try {
    re = setting instanceof RegExp ? setting : new RegExp(setting ?? DEFAULT_OBSERVATION_PATTERN, 'u');
  } catch {
    throw new ConfigError(`${api}: options.observations must be a valid regular expression, a predicate or 'none'`);
  }
  const test: ObservationTest = (text) => {
    re.lastIndex = 0;
    return re.test(text);
  };
  return Object.assign(test, { [BY_TEXT]: true as const });
}

/** A finished scan of a view's slots: where it ended, what it found, the command in force at the end. */
interface Scan {
  /** The view scanned. */
  readonly view: RequestView;
  readonly start: number;
  readonly head: number;
  readonly out: readonly Slot[];
  readonly command: string | undefined;
}

/** A finished scan for host tool outputs: the view's slots and the outputs among its item slots. */
type OutputScan = Pick<Scan, 'view' | 'head' | 'out'>;

/**
 * What the scans of one session keep for its next request (held in its SessionState): each
 * conversation's last scan (by its first item slot) and what was learnt per message object.
 */
export interface ObservationMemo {
  /** Per pattern test: its answer per message object, and the last scan of each conversation. */
  readonly byTest: Map<
    ObservationTest,
    { readonly answers: WeakMemo<object, boolean>; readonly scans: WeakMemo<Slot, Scan> }
  >;
  /** The last fenced block of an assistant message (trimmed), per message object. */
  readonly commands: WeakMemo<object, string | null>;
  /** The last {@link hostToolOutputs} scan of each conversation. */
  readonly outputScans: WeakMemo<Slot, OutputScan>;
}

/** An empty {@link ObservationMemo}. */
export const createObservationMemo = (): ObservationMemo => ({
  byTest: new Map(),
  commands: new WeakMemo(),
  outputScans: new WeakMemo(),
});

/** The memos of a pattern test (created on first use); undefined for a predicate. */
function memoOf(memo: ObservationMemo, test: ObservationTest): ReturnType<ObservationMemo['byTest']['get']> {
  if (!byText(test)) return undefined;
  let m = memo.byTest.get(test);
  if (m === undefined) memo.byTest.set(test, (m = { answers: new WeakMemo(), scans: new WeakMemo() }));
  return m;
}

function commandOf(commands: ObservationMemo['commands'], slot: Slot): string | undefined {
  const holder = slot.value as object;
  let known = commands.get(holder);
  if (known === undefined)
    commands.set(
      holder,
      (known = (slot.text === undefined ? undefined : fencedBlocks(slot.text).at(-1)?.trim()) ?? null),
    );
  return known ?? undefined;
}

function accepts(
  answers: WeakMemo<object, boolean> | undefined,
  test: ObservationTest,
  text: string,
  item: unknown,
  index: number,
): boolean {
  if (answers === undefined || typeof item !== 'object' || item === null) return test(text, item, index);
  let answer = answers.get(item);
  if (answer === undefined) answers.set(item, (answer = test(text, item, index)));
  return answer;
}

/** Where a scan of `view` goes on from the scan `last` (same `head`): its length when `view` holds its slots first, else 0. */
function sharedScan(view: RequestView, last: OutputScan | undefined, head: number): number {
  if (last?.head !== head) return 0;
  const before = last.view.slots;
  if (before.length > view.slots.length) return 0;
  let k = viewExtends(view, last.view) ? before.length : head;
  while (k < before.length && view.slots[k] === before[k]) k++;
  return k === before.length ? k : 0;
}

/** Index of the first assistant item: everything before it is the instruction prefix. -1 when none. */
export function prefixEnd(view: RequestView): number {
  return view.itemInfo.findIndex((i) => i.role === 'assistant');
}

/**
 * Tool-output slots for the recognised observations of a request: user messages after the
 * instruction prefix whose text the test accepts (string contents, or text-only part lists). The
 * slot's call args carry the command: the last fenced block of the assistant message before it.
 * `session` keeps the scan for the session's next request.
 */
export function observationSlots(view: RequestView, test: ObservationTest, session: ObservationMemo): Slot[] {
  const start = prefixEnd(view);
  if (start === -1) return [];
  // A pattern's scan goes on from the previous scan of the same conversation (the slots an
  // extended view shares with it are the same objects, and so are the observation slots found).
  let head = 0;
  while (head < view.slots.length && view.slots[head]!.item === undefined) head++;
  const first = view.slots[head];
  const byTest = memoOf(session, test);
  const memo = first === undefined ? undefined : byTest?.scans;
  const last = memo?.get(first!);
  let from = head;
  let out: Slot[] = [];
  let command: string | undefined;
  const shared = last?.start === start ? sharedScan(view, last, head) : 0;
  if (shared > 0) [from, out, command] = [shared, last!.out.slice(), last!.command];
  for (let x = from; x < view.slots.length; x++) {
    const slot = view.slots[x]!;
    if (slot.item === undefined || slot.item <= start) continue;
    if (slot.kind === 'assistant') {
      command = commandOf(session.commands, slot);
      continue;
    }
    if (slot.kind !== 'user' || slot.text === undefined) continue;
    const content = (slot.value as { content?: unknown }).content;
    const textOnly =
      typeof content === 'string' ||
      (Array.isArray(content) &&
        content.every(
          (p) => typeof p === 'object' && p !== null && typeof (p as { text?: unknown }).text === 'string',
        ));
    if (!textOnly || !accepts(byTest?.answers, test, slot.text, slot.value, slot.item)) continue;
    out.push({
      kind: 'tool_output',
      path: [...slot.path, 'content'],
      value: content,
      item: slot.item,
      callId: `observation-${slot.item}`,
      toolName: 'terminal',
      callArgs: command === undefined ? {} : { command },
    });
  }
  memo?.set(first!, { view, start, head, out: out.slice(), command });
  return out;
}

/**
 * `view.slots.filter(kind tool_output, not a recovery result)` (what the request stages manage), scanned on from the
 * conversation's previous view. The list may be the session's scan, which its next request extends in place
 * (a caller that keeps it takes {@link managedOutputs}).
 */
export function hostToolOutputs(view: RequestView, { outputScans }: ObservationMemo): readonly Slot[] {
  const keep = (s: Slot): boolean => s.kind === 'tool_output' && !isRecoveryResult(s);
  let head = 0;
  while (head < view.slots.length && view.slots[head]!.item === undefined) head++;
  const out: Slot[] = view.slots.slice(0, head).filter(keep);
  const first = view.slots[head];
  if (first === undefined) return out;
  const last = outputScans.get(first);
  const shared = sharedScan(view, last, head);
  const found = shared > 0 ? (last!.out as Slot[]) : [];
  for (let x = shared > 0 ? shared : head; x < view.slots.length; x++)
    if (keep(view.slots[x]!)) found.push(view.slots[x]!);
  outputScans.set(first, { view, head, out: found });
  return out.length === 0 ? found : [...out, ...found];
}

/** What the request stages manage: the host's tool outputs, then the observations; a list of the caller's own (the session's scans grow in place). */
export function managedOutputs(view: RequestView, test: ObservationTest, memo: ObservationMemo): Slot[] {
  return hostToolOutputs(view, memo).concat(observationSlots(view, test, memo));
}
