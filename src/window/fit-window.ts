/**
 * The window fit (docs/window.md): when a compiled request and the output reserve R do not fit the
 * budgeting window W, reduce its history losslessly, in the order of src/window/plan.ts, down to a
 * low-water mark below W − R, so the cache-breaking rewrite happens once. Every rendering the
 * session chose stays chosen (keyed by the exact text it replaces), so between two fits request
 * N+1 starts with request N. Counting: the incremental per-item counts far from the boundary, the
 * cap's own (exact) counter near it. A request is never cut: what cannot fit passes as it came.
 */
import { STAGES } from '../stages.js';
import type { BudgetCounter } from '../budget/counter.js';
import type { BudgetRun } from '../budget/planner.js';
import { idleTurns, itemReferenceWords } from '../compile/working-set.js';
import type { SessionState } from '../compile/session.js';
import { readRequest, withItems, writeSlots } from '../model/index.js';
import type { Digests } from '../ledger/digests.js';
import type { RequestView } from '../model/types.js';
import { serializedChars } from '../measure/index.js';
import { advance, note, storeScope, type ProviderRequest, type Step, type StepContext } from '../step.js';
import { boundsOf, fitSlots, namedLines, renderingFor, type FitSlot, type FitStep, type Rendering } from './plan.js';
import {
  BLOCK_MODES,
  BLOCK_TOOL,
  blockableTurns,
  itemKey,
  renderBlock,
  withBlocks,
  usersIn,
  type Block,
  type ChosenBlock,
  type Turn,
} from './blocks.js';

const STAGE = STAGES.fitWindow;

/** The validated settings of the stage. */
export interface FitSettings {
  /** The low-water mark as a share of W − R (percent). */
  readonly lowWaterPct: number;
  /** Within this share of W (percent) the exact counter decides. */
  readonly exactMarginPct: number;
  readonly order: readonly FitStep[];
  readonly minChars: number;
  readonly idleTurns: number;
  readonly diagnosticChars: number;
  readonly viewChars: number;
  /**
   * Counted with the counter (o200k unless configured), a prompt for a provider with its own
   * tokenizer (any but OpenAI's) may hold this many percent fewer tokens than its own count says.
   */
  readonly foreignMarginPct: number;
  /** An output above this share of W − R (percent, in estimated tokens) is oversized. */
  readonly oversizePct: number;
}

/** The per-session part of the stage: the renderings chosen so far, by the exact text they replace. */
export interface FitState {
  readonly session: SessionState;
  readonly chosen: Map<string, Rendering>;
  /** The blocks of turns chosen so far, by the key of their first item. */
  readonly blocks: Map<string, ChosenBlock>;
}

/** One fit in progress: the request as rendered now, and its counts. */
interface Work {
  readonly view: RequestView;
  readonly slots: readonly FitSlot[];
  readonly current: (Rendering | undefined)[];
  items: unknown[];
  /** Blocks of turns rendered as one item each (sticky ones first, then this fit's, also in `fresh`). */
  blocks: Block[];
  readonly fresh: Block[];
  /** The incremental count, the last exact count's lead over it, and that exact count. */
  estimate: number;
  offset: number;
  prompt: number;
  /** The cap's exact count of `request` (the request as rendered now), infinite when it cannot count. */
  readonly exact: (request?: ProviderRequest) => Promise<number>;
  /** The tokens of item `i` as rendered now, and of any item. */
  readonly itemTokens: (i: number) => number;
  readonly tokensOf: (item: unknown) => number;
}

/** One request through the stage; undefined when it leaves the request as it is without a word. */
export async function fitRequest(
  step: Step<ProviderRequest>,
  state: FitState,
  counting: { readonly run: BudgetRun; readonly estimator: BudgetCounter },
  s: FitSettings,
  signal: AbortSignal,
): Promise<Step<ProviderRequest> | undefined> {
  const { run, estimator } = counting;
  const request = step.value;
  const limits = run.limits(request, step.context);
  if (limits === undefined) return undefined;
  const { window: W, reserve: R } = limits;
  const room = promptRoomFor(W, R, step.context, s.foreignMarginPct);
  const margin = Math.ceil((W * s.exactMarginPct) / 100);
  // Nothing chosen yet and far below the boundary: the request is not even read (the common case).
  if (
    state.chosen.size === 0 &&
    state.blocks.size === 0 &&
    (await estimator.countRequest(request, signal)) <= room - margin
  )
    return undefined;
  const view = readRequest(request);
  const bounds = boundsOf(view);
  if (view.listKey === undefined || bounds === undefined) return undefined;
  const slots = fitSlots(view, bounds, s.minChars);
  const current = slots.map((f) => state.chosen.get(f.evidence));
  const turns = blockableTurns(view, bounds);
  const counted = new Map<number, number>();
  const tokensOf = (item: unknown): number =>
    state.session.meter.tokens(item) ?? Math.ceil(state.session.meter.measure(item).chars / 3);
  const build = (): ProviderRequest => withItems(request, view.listKey!, withBlocks(w.items, w.blocks));
  const w: Work = {
    view,
    slots,
    current,
    items: view.items as unknown[],
    blocks: state.blocks.size > 0 ? stickyBlocks(state, view, turns) : [],
    fresh: [],
    estimate: 0,
    offset: 0,
    prompt: 0,
    exact: async (r = build()) => (await run.count(r, step.context, signal)) ?? Number.POSITIVE_INFINITY,
    itemTokens: (i) => counted.get(i) ?? tokensOf(w.items[i]),
    tokensOf,
  };
  w.items = render(state, w, new Set(current.flatMap((r, k) => (r === undefined ? [] : [slots[k]!.slot.item!]))));
  // The incremental count (per item, memoized by content) far from the boundary; near it the cap's own.
  w.estimate = await estimator.countRequest(build(), signal);
  w.prompt = w.estimate > room - margin ? await w.exact() : w.estimate;
  const before = w.prompt;
  const counts = { window: W, reserve: R, room, before };
  const skipped = (why: string) => note(step, { stage: STAGE, kind: 'skipped', reason: `${why}: passed as it came` });
  if (w.prompt <= room)
    return current.some((r) => r !== undefined) || w.blocks.length > 0
      ? deliver(step, state, w, [], { ...counts, after: w.prompt })
      : undefined;
  // Over: take the steps in order until the estimate is at the low-water mark, then check exactly.
  const target = Math.floor((room * s.lowWaterPct) / 100);
  const added: number[] = [];
  const plan = planSteps(state, w, s, room);
  w.offset = w.prompt - w.estimate;
  for (let round = 0; round < 3; round++) {
    for (let next = plan.next(); next !== undefined; next = plan.next()) {
      const i = w.slots[next.k]!.slot.item!;
      const old = w.itemTokens(i);
      w.current[next.k] = next.r;
      w.items = render(state, w, new Set([i]));
      counted.set(i, tokensOf(w.items[i]));
      w.estimate += counted.get(i)! - old;
      if (!added.includes(next.k)) added.push(next.k);
      if (w.estimate + w.offset <= target) break;
    }
    if ((await recount(w)) <= room || plan.done()) break;
  }
  if (w.prompt > room) {
    // The prefix, the newest turn and R alone: when they do not fit, nothing lossless can help.
    const core = await w.exact(
      withItems(request, view.listKey, [...view.items.slice(0, bounds.start), ...view.items.slice(bounds.newest)]),
    );
    if (core > room)
      return skipped(
        `window_exceeded: the prefix and the newest turn alone are ${core} of ${room} tokens (${roomText(W, R, room)})`,
      );
    await blockTurns(w, state.session.meter.digests, turns, room, target);
  }
  if (w.prompt > room)
    return skipped(
      `window_user_messages: the prefix, the newest turn and the user-authored messages leave ${w.prompt} of ${room} tokens (${roomText(W, R, room)}) after every lossless step`,
    );
  return deliver(step, state, w, added, { ...counts, after: w.prompt });
}

/** Count the request exactly again, correcting the estimate's offset; the new count. */
async function recount(w: Work): Promise<number> {
  w.prompt = await w.exact();
  w.offset = w.prompt - w.estimate;
  return w.prompt;
}

/**
 * One receipt per block of old turns, oldest first, until the request fits `room`: first keeping
 * text actions, then every call verbatim, then with the long arguments of their calls shortened,
 * and last naming a few commands.
 */
async function blockTurns(
  w: Work,
  digests: Digests,
  turns: readonly (Turn | undefined)[],
  room: number,
  target: number,
): Promise<void> {
  // What rendering the turns of `b` as one block adds to the estimate (negative: it saves).
  const delta = (b: Block): number => {
    let n = w.tokensOf(b.item) + b.users.reduce<number>((sum, u) => sum + w.tokensOf(u), 0);
    for (let i = b.from; i < b.to; i++) n -= w.itemTokens(i);
    return n;
  };
  const drop = (b: Block): void => {
    w.estimate -= delta(b);
    w.blocks = w.blocks.filter((x) => x !== b);
    if (w.fresh.includes(b)) w.fresh.splice(w.fresh.indexOf(b), 1);
  };
  for (const mode of BLOCK_MODES) {
    if (w.prompt <= room) break;
    if (mode !== 'text') {
      // Each pass keeps less of the actions: this fit's blocks, and the session's earlier blocks
      // that keep more than this pass, are made again over every old turn (so they are few).
      const redo = w.blocks.filter(
        (x) => w.fresh.includes(x) || BLOCK_MODES.indexOf(x.mode) < BLOCK_MODES.indexOf(mode),
      );
      redo.forEach(drop);
    }
    let open: Turn[] = [];
    let openBlock: Block | undefined;
    for (const t of turns) {
      // The estimate says enough: the exact count decides, and corrects the estimate if not.
      if (w.estimate + w.offset <= target && (await recount(w)) <= room) break;
      const covered = t !== undefined && w.blocks.some((b) => b.from <= t.from && t.to <= b.to && b !== openBlock);
      if (t === undefined || covered || (mode === 'text' && t.calls)) {
        open = [];
        openBlock = undefined;
        continue;
      }
      open.push(t);
      const next = renderBlock(digests, w.view, open, mode);
      if (openBlock !== undefined) drop(openBlock);
      w.estimate += delta(next);
      w.blocks.push(next);
      w.fresh.push(next);
      openBlock = next;
    }
    await recount(w);
  }
}

/**
 * The prompt tokens (as the counter counts them) a request may hold: W − R, less the tokens the
 * host adds after the pipeline (`context.addedPromptTokens`, the gateway's recovery tool), divided
 * by 1 + the foreign-tokenizer margin (percent) when the route's provider counts with another
 * tokenizer than the counter's (docs/window.md). The one reckoning the fit and the preflight
 * pressure share.
 *
 * @example
 * promptRoomFor(16_000, 1024, { sessionId: 's', format: 'anthropic', addedPromptTokens: 300 }, 25); // 11_740
 */
export function promptRoomFor(W: number, R: number, context: StepContext, foreignMarginPct: number): number {
  const added = Math.max(0, context.addedPromptTokens ?? 0);
  return Math.floor(((W - R - added) * 100) / (100 + routeMarginPct(context, foreignMarginPct)));
}

/**
 * The foreign-tokenizer margin (percent) for the request's route: `foreignMarginPct` when its
 * provider counts tokens its own way (Anthropic, Google …: any provider but OpenAI's), else 0.
 */
export function routeMarginPct(context: StepContext, foreignMarginPct: number): number {
  const provider = context.route?.provider?.toLowerCase();
  const foreign =
    provider === undefined ? context.format === 'anthropic' : !['openai', 'azure', 'azure-openai'].includes(provider);
  return foreign ? foreignMarginPct : 0;
}

function roomText(W: number, R: number, room: number): string {
  return room === W - R ? `W ${W} − R ${R}` : `W ${W} − R ${R}, less what the host adds and the tokenizer margin`;
}

/** The blocks the session chose before that this request still holds exactly. */
function stickyBlocks(state: FitState, view: RequestView, turns: readonly (Turn | undefined)[]): Block[] {
  const digests = state.session.meter.digests;
  const out: Block[] = [];
  let after = 0;
  for (const t of turns) {
    if (t === undefined || t.from < after) continue;
    const c = state.blocks.get(itemKey(digests, view.items[t.from]));
    if (c === undefined) continue;
    const to = t.from + c.count;
    if (!turns.some((u) => u !== undefined && u.to === to)) continue;
    const evidence = JSON.stringify(view.items.slice(t.from, to));
    if (digests.of(evidence) !== c.evidenceSha) continue;
    out.push({
      from: t.from,
      to,
      mode: c.mode,
      item: c.item,
      users: usersIn(view, t.from, to),
      evidence,
      artifactId: c.artifactId,
    });
    after = to;
  }
  return out;
}

/** The items with every current rendering written in (only the items in `changed` are rebuilt). */
function render(state: FitState, w: Work, changed: ReadonlySet<number>): unknown[] {
  if (changed.size === 0) return w.items;
  const items = w.items.slice();
  for (const i of changed) {
    const changes = w.slots.flatMap((f, k) => {
      const r = w.current[k];
      return f.slot.item === i && r !== undefined ? [{ path: f.slot.path.slice(2), value: r.text }] : [];
    });
    const original = w.view.items[i];
    items[i] =
      changes.length === 0
        ? original
        : state.session.renders.render(original as object, changes, () => writeSlots(original, changes));
  }
  return items;
}

/** The reductions of the request in the configured order, one at a time. */
function planSteps(
  state: FitState,
  w: Work,
  s: FitSettings,
  room: number,
): { next(): { k: number; r: Rendering } | undefined; done(): boolean } {
  const settings = { digests: state.session.meter.digests, diagnosticChars: s.diagnosticChars, viewChars: s.viewChars };
  const oversize = Math.floor(((room * s.oversizePct) / 100) * 3);
  let idle: number[] | undefined;
  const idleOf = (k: number): number => {
    if (idle === undefined) {
      const outputs = w.slots.filter((f) => f.kind === 'output').map((f) => f.slot);
      const turns = idleTurns(state.session, w.view, outputs);
      let o = 0;
      idle = w.slots.map((f) => (f.kind === 'output' ? turns[o++]! : 0));
    }
    return idle[k]!;
  };
  /** The words the agent's items after item `i` name (its text, calls and their arguments). */
  const namedAfter = (i: number): Set<string> => {
    const out = new Set<string>();
    for (let j = i + 1; j < w.view.items.length; j++)
      if (w.view.itemInfo[j]?.role === 'assistant')
        for (const x of itemReferenceWords(state.session, w.view.items[j])) out.add(x);
    return out;
  };
  let stage = 0;
  let k = 0;
  const wanted = (name: FitStep, f: FitSlot, k: number, cur: Rendering | undefined): boolean => {
    if (name === 'view') return cur === undefined && f.kind === 'output' && f.chars > oversize;
    if (name === 'digest-idle') return (cur === undefined || cur.kind === 'view') && idleOf(k) >= s.idleTurns;
    if (name === 'digest') return cur === undefined || cur.kind === 'view';
    if (name === 'reasoning') return cur === undefined;
    return cur !== undefined && cur.kind !== 'receipt' && cur.kind !== 'reasoning';
  };
  return {
    next() {
      while (stage < s.order.length) {
        const name = s.order[stage]!;
        while (k < w.slots.length) {
          const f = w.slots[k]!;
          const cur = w.current[k];
          const at = k++;
          if (!wanted(name, f, at, cur)) continue;
          // A bounded view keeps first the lines naming what the agent named since the output came.
          const keep = name === 'view' ? namedLines(f.shown, namedAfter(f.slot.item!)) : undefined;
          const r = renderingFor(settings, f, name === 'digest-idle' ? 'digest' : name, cur, keep);
          if (r !== undefined) return { k: at, r };
        }
        stage++;
        k = 0;
      }
      return undefined;
    },
    done: () => stage >= s.order.length,
  };
}

/** Vault and deliver every rendering the request names, remember the new ones, and emit. */
async function deliver(
  step: Step<ProviderRequest>,
  state: FitState,
  w: Work,
  added: readonly number[],
  o: { window: number; reserve: number; room: number; before: number; after: number },
): Promise<Step<ProviderRequest>> {
  const scope = storeScope(step.context);
  const failedOpen = (why: string, error: string) =>
    note(step, { stage: STAGE, kind: 'failed_open', reason: `${why}: passed through`, error });
  const { evidence, meter } = state.session;
  const digests = meter.digests;
  evidence.begin(scope);
  const inBlock = (k: number): boolean => {
    const i = w.slots[k]!.slot.item!;
    return w.blocks.some((b) => b.from <= i && i < b.to);
  };
  const used = w.current.flatMap((r, k) => (r === undefined || inBlock(k) ? [] : [r]));
  const ids = [...new Set([...used.map((r) => r.artifactId), ...w.blocks.map((b) => b.artifactId)])];
  try {
    const puts = [...added.map((k) => w.current[k]!), ...w.fresh.map((b) => ({ ...b, toolName: BLOCK_TOOL }))];
    for (const { evidence: text, toolName, artifactId } of puts) {
      const stored = await evidence.receipt(text, { toolName, sessionId: step.context.sessionId, scope });
      if (stored.artifactId !== artifactId) throw new Error('artifact id differs from the rendered one');
    }
    const gone = await evidence.deliver(ids, scope);
    if (gone.length > 0) {
      for (const r of used) if (gone.includes(r.artifactId)) state.chosen.delete(r.evidence);
      for (const b of w.blocks)
        if (gone.includes(b.artifactId)) state.blocks.delete(itemKey(digests, w.view.items[b.from]));
      return failedOpen(`${gone.length} receipt(s) named artifacts gone before delivery`, 'ArtifactGone');
    }
  } catch (error) {
    return failedOpen('vault write failed', (error as Error).name);
  }
  for (const k of added) state.chosen.set(w.current[k]!.evidence, w.current[k]!);
  for (const b of w.fresh)
    state.blocks.set(itemKey(digests, w.view.items[b.from]), {
      count: b.to - b.from,
      mode: b.mode,
      evidenceSha: digests.of(b.evidence),
      item: b.item,
      artifactId: b.artifactId,
    });
  const request = withItems(step.value, w.view.listKey!, withBlocks(w.items, w.blocks));
  const kinds = [
    ...added.filter((k) => !inBlock(k)).map((k) => w.current[k]!.kind),
    ...w.fresh.map((b) => (b.mode === 'text' ? 'block' : b.mode === 'calls' ? 'block-actions' : `block-${b.mode}`)),
  ];
  const what = [...new Set(kinds)].map((kind) => `${kinds.filter((x) => x === kind).length} ${kind}`).join(', ');
  const reason =
    added.length === 0 && w.fresh.length === 0
      ? `window fit: ${used.length} earlier rendering(s) kept, prompt ${o.after} of ${o.room}`
      : `window fit: ${what}; prompt ${o.before} → ${o.after} of ${o.room} (${roomText(o.window, o.reserve, o.room)}), new batch`;
  return advance(step, request, {
    stage: STAGE,
    kind: 'applied',
    reason,
    savedChars: serializedChars(step.value) - serializedChars(request),
    artifacts: ids,
  });
}
