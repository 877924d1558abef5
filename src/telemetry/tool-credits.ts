/**
 * What the tool-result stages saved in each request, as the model got it. A tool output is reduced
 * once and then travels as that rendering in every later request of its session, so the credit is
 * taken per request, per rendering it shows: the raw output's size less the larger of the
 * rendering and what the request finally showed for it (a request stage may still replace it).
 *
 * In-process hosts hand the request stages a request that already holds the renderings: the raw
 * request is that request with each rendering's raw size back ({@link ToolCredits.account}). The
 * gateway has the client's own body and reads only the credits. Renderings are keys in memory,
 * never written.
 */
import { canonicalJson, codePoints } from '../measure/index.js';
import type { TokenCounter } from '../measure/types.js';
import { readRequest } from '../model/index.js';
import { isObj } from '../model/read.js';
import { STAGES } from '../stages.js';
import { savedByStage } from './metrics.js';
import type { Decision, ProviderRequest, RequestFormat } from '../step.js';

/** The tool-result stages, whose saving travels with the output's rendering. */
const TOOL_STAGES: ReadonlySet<string> = new Set([STAGES.deltaRepeatedOutput, STAGES.compressToolResult]);
const DELTA_PREFIX = '[Token Terminator temporal delta';

/** One rendering of a session: its raw output (until measured) and sizes, and the stages that made it. */
export interface Credit {
  raw: string | undefined;
  rawChars: number;
  rawTokens: number;
  renderedChars: number;
  renderedTokens: number;
  /** Stage → share of the saving (sums to 1). */
  readonly stages: Readonly<Record<string, number>>;
}

/** What the renderings a request shows saved, and how much larger the raw request is. */
export interface ToolAccount {
  /** Characters the raw request has beyond the request the stages were given. */
  readonly rawChars: number;
  /** Tokens the raw request has beyond it. */
  readonly rawTokens: number;
  /** Characters saved per tool-result stage in this request (only what reached the model). */
  readonly saved: Readonly<Record<string, number>>;
}

const NONE: ToolAccount = Object.freeze({ rawChars: 0, rawTokens: 0, saved: Object.freeze({}) });

/** The text of a tool output value: a string, text parts (joined by newlines) or one text object. */
function outputText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  const texts = (Array.isArray(value) ? value : [value]).map((p: unknown) => (isObj(p) ? p['text'] : undefined));
  return texts.every((t) => typeof t === 'string') ? texts.join('\n') : undefined;
}

/** The stages that made a rendering, weighted by what each reported saving; by the text when none did. */
function stagesOf(decisions: readonly Decision[], rendered: string): Record<string, number> {
  const by = savedByStage(decisions.filter((d) => TOOL_STAGES.has(d.stage)));
  const total = Object.values(by).reduce((a, b) => a + b, 0);
  if (total === 0)
    return { [rendered.startsWith(DELTA_PREFIX) ? STAGES.deltaRepeatedOutput : STAGES.compressToolResult]: 1 };
  for (const k of Object.keys(by)) by[k] = by[k]! / total;
  return by;
}

const jsonChars = (text: string): number => codePoints(canonicalJson(text));

/** One session's renderings → their credits, held in its Session (src/session/session-cache.ts). */
export class SessionCredits extends Map<string, Credit> {
  /** Characters of raw outputs held until their first request measures them. */
  pending = 0;
}

/** What holds the sessions whose credits these are (the runtime's SessionCache), by session key. */
export interface CreditHolders {
  of(key: string): { credits: SessionCredits | undefined };
  peek(key: string): { readonly credits: SessionCredits | undefined } | undefined;
  /** The sessions held now, least recently used first. */
  oldestFirst(): readonly { readonly key: string; credits: SessionCredits | undefined }[];
}

/**
 * Per session: each tool output's rendering → its raw size and the stages that made it, kept in the
 * session (so it goes with it). Bounded per session in entries, and over all sessions in the raw
 * text not yet measured (past it the credits of the least recently used sessions go).
 *
 * @example
 * const credits = new ToolCredits(sessions);
 * credits.note('s1', step.value.content, step.original.content, step.decisions);
 * const { saved } = credits.account('s1', stagesInput, finalRequest, counter);
 */
export class ToolCredits {
  readonly #sessions: CreditHolders;
  readonly #maxPerSession: number;
  readonly #maxPendingChars: number;
  /** At least the characters of raw outputs held until measured (a session dropped elsewhere is subtracted on the next recount). */
  #pending = 0;

  /**
   * @param sessions - the sessions that hold the credits.
   * @param maxPerSession - renderings remembered per session; default 4096.
   * @param maxPendingChars - characters of raw outputs held until measured, over all sessions
   *   (past it the least recently used sessions' credits are forgotten); default 16,777,216.
   */
  constructor(sessions: CreditHolders, maxPerSession = 4096, maxPendingChars = 16 * 2 ** 20) {
    this.#sessions = sessions;
    this.#maxPerSession = maxPerSession;
    this.#maxPendingChars = maxPendingChars;
  }

  /** A tool output of `session` was shown as `rendered` instead of `raw` (by the stages in `decisions`). */
  note(session: string, rendered: string, raw: string, decisions: readonly Decision[]): void {
    if (rendered === raw) return;
    const holder = this.#sessions.of(session);
    const map = (holder.credits ??= new SessionCredits());
    if (map.has(rendered)) return;
    map.set(rendered, {
      raw,
      rawChars: -1,
      rawTokens: -1,
      renderedChars: -1,
      renderedTokens: -1,
      stages: stagesOf(decisions, rendered),
    });
    map.pending += raw.length;
    this.#pending += raw.length;
    if (map.size > this.#maxPerSession) {
      const oldest = map.keys().next().value as string;
      this.#measured(map, map.get(oldest)!);
      map.delete(oldest);
    }
    if (this.#pending <= this.#maxPendingChars) return;
    // Least recently used sessions' credits go first; the one in use stays.
    const held = this.#sessions.oldestFirst();
    this.#pending = held.reduce((n, h) => n + (h.credits?.pending ?? 0), 0);
    for (const h of held) {
      if (this.#pending <= this.#maxPendingChars || h.key === session) break;
      this.#pending -= h.credits?.pending ?? 0;
      h.credits = undefined;
    }
  }

  /** A credit's raw text is let go (measured or forgotten). */
  #measured(map: SessionCredits, credit: Credit): void {
    const chars = credit.raw?.length ?? 0;
    map.pending -= chars;
    this.#pending -= chars;
  }

  /**
   * The renderings `input` (the request the stages were given) shows, credited against `final`
   * (what the model got): how much larger the raw request is, and what each tool stage saved.
   * `raw`, when the host has the raw request itself (the gateway), names renderings this process
   * did not make (another replica did): their credit is read from its outputs by call id.
   * `format`: the wire format the host named (StepContext.format); detected when absent.
   */
  account(
    session: string,
    input: ProviderRequest,
    final: ProviderRequest,
    counter: TokenCounter,
    raw?: ProviderRequest,
    format?: RequestFormat,
  ): ToolAccount {
    const read = format === undefined ? {} : { format };
    const known = this.#sessions.peek(session)?.credits;
    if (known === undefined && raw === undefined) return NONE;
    let finalTexts: Map<string, string> | undefined;
    let rawTexts: Map<string, string> | undefined;
    const saved: Record<string, number> = {};
    let rawChars = 0;
    let rawTokens = 0;
    for (const slot of readRequest(input, read).slots) {
      if (slot.kind !== 'tool_output') continue;
      const text = outputText(slot.value);
      if (text === undefined) continue;
      let credit = known?.get(text);
      if (credit === undefined && raw !== undefined && slot.callId !== undefined) {
        rawTexts ??= outputTexts(raw, read);
        const source = rawTexts.get(slot.callId);
        if (source === undefined || source === text) continue;
        this.note(session, text, source, []);
        credit = this.#sessions.peek(session)?.credits?.get(text);
      }
      if (credit === undefined) continue;
      const map = this.#sessions.peek(session)?.credits;
      if (map !== undefined) this.#measured(map, credit);
      measure(credit, text, counter);
      rawChars += credit.rawChars - credit.renderedChars;
      rawTokens += credit.rawTokens - credit.renderedTokens;
      finalTexts ??= outputTexts(final, read);
      const shown = slot.callId === undefined ? text : (finalTexts.get(slot.callId) ?? text);
      const shownChars = shown === text ? credit.renderedChars : jsonChars(shown);
      const chars = credit.rawChars - Math.max(credit.renderedChars, shownChars);
      if (chars <= 0) continue;
      // A delta the request replaced by the output's first view: the view's saving, not the delta's.
      const stages =
        shown !== text && text.startsWith(DELTA_PREFIX) ? { [STAGES.compressToolResult]: 1 } : credit.stages;
      for (const [stage, share] of Object.entries(stages))
        saved[stage] = (saved[stage] ?? 0) + Math.round(chars * share);
    }
    return rawChars === 0 && Object.keys(saved).length === 0 ? NONE : { rawChars, rawTokens, saved };
  }
}

/** Sizes of a credit, measured on first use (then its raw text is let go). */
function measure(credit: Credit, rendered: string, counter: TokenCounter): void {
  if (credit.raw === undefined) return;
  const rawJson = canonicalJson(credit.raw);
  const renderedJson = canonicalJson(rendered);
  credit.rawChars = codePoints(rawJson);
  credit.renderedChars = codePoints(renderedJson);
  credit.rawTokens = counter.count(rawJson);
  credit.renderedTokens = counter.count(renderedJson);
  credit.raw = undefined;
}

/** The texts of a request's tool outputs, by call id. */
function outputTexts(request: ProviderRequest, read: { readonly format?: RequestFormat }): Map<string, string> {
  const out = new Map<string, string>();
  for (const slot of readRequest(request, read).slots) {
    if (slot.kind !== 'tool_output' || slot.callId === undefined) continue;
    const text = outputText(slot.value);
    if (text !== undefined) out.set(slot.callId, text);
  }
  return out;
}
