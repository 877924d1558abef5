/**
 * Skill catalogs (Hermes-style `<available_skills>` indexes): parse, score against the user's
 * prompt, and render the kept entries. Pure functions; the SkillGate operator decides where.
 *
 * Block grammar (per trimmed line): blank or `[`-prefixed lines are ignored; a line ending with
 * `:` that does not start with `-` sets the category (default `general`); `- name: description`
 * is an entry (split at the last `": "`; the description may be missing).
 */
import { acceptCandidate, type TokenPair, type Verdict } from '../accept.js';
import { serializedChars } from '../measure/index.js';
import type { TokenCounter } from '../measure/types.js';
import type { Slot } from '../model/types.js';

export interface SkillEntry {
  readonly name: string;
  readonly description: string;
  readonly category: string;
}

export interface CatalogBlock {
  /** Offsets of the whole block (open tag through close tag) inside the text. */
  readonly start: number;
  readonly end: number;
  readonly entries: readonly SkillEntry[];
}

export interface Delimiters {
  readonly open: string;
  readonly close: string;
}

export const HERMES_DELIMITERS: Delimiters = Object.freeze({
  open: '<available_skills>',
  close: '</available_skills>',
});

/** Every catalog block in a text. */
export function findCatalogs(text: string, d: Delimiters = HERMES_DELIMITERS): CatalogBlock[] {
  const blocks: CatalogBlock[] = [];
  let from = 0;
  for (;;) {
    const start = text.indexOf(d.open, from);
    if (start < 0) return blocks;
    const bodyStart = start + d.open.length;
    const close = text.indexOf(d.close, bodyStart);
    if (close < 0) return blocks;
    blocks.push({ start, end: close + d.close.length, entries: parseEntries(text.slice(bodyStart, close)) });
    from = close + d.close.length;
  }
}

export function parseEntries(body: string): SkillEntry[] {
  const entries: SkillEntry[] = [];
  let category = 'general';
  for (const raw of body.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === '' || line.startsWith('[')) continue;
    if (line.startsWith('-')) {
      const item = line.slice(1).trim();
      const cut = item.lastIndexOf(': ');
      const name = (cut < 0 ? item.replace(/:$/, '') : item.slice(0, cut)).trim();
      if (name !== '') entries.push({ name, description: cut < 0 ? '' : item.slice(cut + 2).trim(), category });
    } else if (line.endsWith(':')) {
      category = line.slice(0, -1).trim() || 'general';
    }
  }
  return entries;
}

const STOPWORDS = new Set(
  'a an and are as at be but by do for from how i if in is it me my of on or so that the this to use we what when with you your'.split(
    ' ',
  ),
);

/** Case-folded word-ish tokens (length ≥ 2, stopwords dropped). */
export function lexicalTokens(text: string): string[] {
  const out: string[] = [];
  for (const m of text
    .toLowerCase()
    .replace(/ß/g, 'ss')
    .matchAll(/[\p{L}\p{N}_][\p{L}\p{N}_.+#/-]*/gu)) {
    const t = m[0].replace(/^[-_/.]+|[-_/.]+$/g, '');
    if (t.length >= 2 && !STOPWORDS.has(t)) out.push(t);
  }
  return out;
}

/** A relevance scorer: higher is more relevant; entries ≥ the threshold are kept. */
export type SkillScorer = (prompt: string, entry: SkillEntry) => number;

/** The default lexical IDF scorer over a catalog (IDF computed over its entries). */
export function lexicalIdfScorer(entries: readonly SkillEntry[]): SkillScorer {
  const df = new Map<string, number>();
  for (const e of entries)
    for (const t of new Set(lexicalTokens(`${e.name} ${e.category} ${e.description}`))) df.set(t, (df.get(t) ?? 0) + 1);
  const n = entries.length;
  const idf = (t: string): number => (df.has(t) ? Math.log((n + 1) / (df.get(t)! + 1)) + 1 : 1);
  return (prompt, entry) => {
    const p = new Set(lexicalTokens(prompt));
    const folded = prompt.toLowerCase();
    let score = folded.includes(entry.name.toLowerCase()) ? 20 : 0;
    for (const t of new Set(lexicalTokens(entry.name))) if (p.has(t)) score += 5 * idf(t);
    for (const t of new Set(lexicalTokens(entry.category))) if (p.has(t)) score += 2.5 * idf(t);
    for (const t of new Set(lexicalTokens(entry.description))) if (p.has(t)) score += idf(t);
    return score;
  };
}

export interface RouteOptions {
  readonly minScore: number;
  /** Opt-in cap on kept entries (0 = no cap). */
  readonly maxSkills: number;
  readonly alwaysKeep: readonly string[];
  readonly scorer?: SkillScorer;
}

/** Entries kept for a prompt: score ≥ minScore, sorted by score then name; no cap unless asked. */
export function selectSkills(prompt: string, entries: readonly SkillEntry[], o: RouteOptions): SkillEntry[] {
  const lexical = lexicalIdfScorer(entries);
  const scoreOf = (entry: SkillEntry): number => {
    if (o.alwaysKeep.includes(entry.name)) return Number.POSITIVE_INFINITY;
    try {
      const score = o.scorer === undefined ? lexical(prompt, entry) : o.scorer(prompt, entry);
      return Number.isFinite(score) || score === Number.POSITIVE_INFINITY ? score : lexical(prompt, entry);
    } catch {
      return lexical(prompt, entry);
    }
  };
  const kept = entries
    .map((entry) => ({ entry, score: scoreOf(entry) }))
    .filter((s) => s.score >= o.minScore)
    .sort((a, b) => b.score - a.score || (a.entry.name < b.entry.name ? -1 : a.entry.name > b.entry.name ? 1 : 0));
  return (o.maxSkills > 0 ? kept.slice(0, o.maxSkills) : kept).map((s) => s.entry);
}

/** The routed block: status line, kept entries grouped by category, or one pointer line. */
export function renderCatalog(kept: readonly SkillEntry[], total: number, d: Delimiters = HERMES_DELIMITERS): string {
  if (kept.length === 0) {
    return `${d.open}\n[No listed skill matched this request directly; find one with skills_list(query=...) and load it with skill_view(name).]\n${d.close}`;
  }
  const lines = [
    d.open,
    `[${kept.length}/${total} skills shown as likely relevant; the other ${total - kept.length} stay available through skills_list(query=...) and skill_view(name).]`,
  ];
  // Categories in the order of their first kept entry (a Map keeps insertion order).
  const byCategory = new Map<string, SkillEntry[]>();
  for (const e of kept) byCategory.set(e.category, [...(byCategory.get(e.category) ?? []), e]);
  for (const [c, entries] of byCategory) {
    lines.push(`${c}:`);
    for (const e of entries) lines.push(e.description === '' ? `    - ${e.name}` : `    - ${e.name}: ${e.description}`);
  }
  lines.push(d.close);
  return lines.join('\n');
}

/**
 * The acceptance gate on routed catalogs. Only the instruction texts differ, so comparing them
 * decides for the complete payload: chars as serialized, tokens (with an exact counter) as text
 * with the JSON-escaped forms compared near a tie.
 */
export function gateCatalogs(
  changes: readonly { readonly slot: Slot; readonly text: string }[],
  counter: TokenCounter | undefined,
): { verdict: Verdict; rawChars: number; candidateChars: number; tokens: TokenPair | undefined } {
  const rawChars = changes.reduce((n, c) => n + serializedChars(c.slot.text), 0);
  const candidateChars = changes.reduce((n, c) => n + serializedChars(c.text), 0);
  const sum = (text: (c: (typeof changes)[number]) => string): number =>
    changes.reduce((n, c) => n + counter!.count(text(c)), 0);
  let tokens: TokenPair | undefined;
  const verdict = acceptCandidate({
    rawChars,
    candidateChars,
    receipts: [],
    ...(counter === undefined
      ? {}
      : {
          tokens: () => (tokens = { raw: sum((c) => c.slot.text!), candidate: sum((c) => c.text) }),
          wireTokens: () => ({
            raw: sum((c) => JSON.stringify(c.slot.text!)),
            candidate: sum((c) => JSON.stringify(c.text)),
          }),
        }),
  });
  return { verdict, rawChars, candidateChars, tokens };
}
