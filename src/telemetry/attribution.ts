/**
 * Request attribution: where the tokens of a provider request go. Diagnostic only,
 * content-free: the result holds component names and numbers, never text.
 *
 * Buckets: `instructions` (top-level instructions/system/developer and system/developer
 * messages, skill catalogs cut out), `skill_catalog` (the cut-out `<available_skills>` blocks),
 * `tool_schemas` (tools/functions), `tool_results` (tool/function messages, *_output and
 * tool_result items, or content lists carrying them), `current_user` (the latest user item that is
 * not a tool-result carrier; a string `input`), `history` (every other conversation item),
 * `other` (other top-level keys) and `framing` (total − Σ buckets: keys, brackets, separators).
 * A bucket's chars are those of its values' canonical JSON joined by newlines; its tokens are the
 * sum of its values' token counts, a conversation item counted as its segment of the array
 * (` json,`, memoized per message object by the meter), so framing tokens are the array's edges.
 */
import { canonicalJson, codePoints, serializedObjectChars } from '../measure/index.js';
import type { MessagesMeter } from '../ledger/messages-meter.js';
import { isObj } from '../model/read.js';

/**
 * The parts a request's size is attributed to.
 *
 * @example
 * for (const c of COMPONENTS) console.log(c, attribution.components[c].tokens);
 */
export const COMPONENTS = Object.freeze([
  'instructions',
  'skill_catalog',
  'tool_schemas',
  'tool_results',
  'current_user',
  'history',
  'other',
  'framing',
] as const);
/** One of {@link COMPONENTS}. */
export type Component = (typeof COMPONENTS)[number];

/** The chars and tokens of one component of a request. */
export interface ComponentSize {
  readonly chars: number;
  readonly tokens: number;
}

/** A request's size in chars and tokens, whole and per {@link Component}. */
export interface Attribution {
  /** Serialized chars of the whole request (canonical JSON, code points). */
  readonly totalChars: number;
  /** Tokens of the conversation array (exact) plus the other top-level values. */
  readonly totalTokens: number;
  readonly components: Readonly<Record<Component, ComponentSize>>;
}

const SKILLS = /<available_skills>[\s\S]*?<\/available_skills>/g;
const TOOL_ITEM_TYPES = new Set(['function_call_output', 'tool_result', 'computer_call_output', 'mcp_call_output']);
const INSTRUCTION_KEYS = new Set(['instructions', 'system', 'developer']);
const SCHEMA_KEYS = new Set(['tools', 'functions']);
const INSTRUCTION_ROLES: ReadonlySet<unknown> = new Set(['system', 'developer']);

/** Each component's running sums (`count`: values added, for the newline between two). */
type Acc = Record<Component, { chars: number; tokens: number; count: number }>;

/**
 * Attribute a request's size to components. Unknown shapes land in `other`.
 *
 * @param skillCuts - instructions already cut into skill blocks and the rest; pass the same one
 *   for the requests of a host to cut each instruction object once. Default: a fresh one.
 * @example
 * import { createTiktokenCounter } from 'token-terminator';
 * const { components } = attributeRequest(request, createMessagesMeter(createTiktokenCounter()));
 * components.tool_results.tokens; // tokens the tool outputs take
 */
export function attributeRequest(
  request: unknown,
  meter: MessagesMeter,
  skillCuts: SkillCuts = createSkillCuts(),
): Attribution {
  const acc = Object.fromEntries(COMPONENTS.map((c) => [c, { chars: 0, tokens: 0, count: 0 }])) as Acc;
  const add = (bucket: Component, chars: number, tokens: number): void => {
    const a = acc[bucket];
    a.chars += chars + (a.count > 0 ? 1 : 0);
    a.tokens += tokens;
    a.count++;
  };
  const addValue = (bucket: Component, value: unknown): void =>
    add(bucket, meter.entry(value).chars, meter.aloneTokens(value));
  // A conversation item's tokens are its share of the array (` json,`), which the meter has
  // usually counted already for the request total: no second tokenization per message.
  const addItem = (bucket: Component, item: unknown): void =>
    add(bucket, meter.entry(item).chars, meter.midTokens(item));
  const addInstruction = (value: unknown, item: boolean): void => {
    const cut = cutSkills(value, skillCuts);
    if (cut === undefined) return item ? addItem('instructions', value) : addValue('instructions', value);
    add('instructions', codePoints(cut.rest), (cut.restTokens ??= meter.counter.count(cut.rest)));
    for (const block of cut.blocks) addValue('skill_catalog', block);
  };

  if (typeof request !== 'object' || request === null || Array.isArray(request)) {
    const e = meter.entry(request);
    return { totalChars: e.chars, totalTokens: meter.aloneTokens(request), components: finish(acc, e.chars, 0) };
  }
  const obj = request as Record<string, unknown>;
  const sizes: [string, number][] = [];
  let totalTokens = 0;
  for (const [key, value] of Object.entries(obj)) {
    if (value === undefined || typeof value === 'function' || typeof value === 'symbol') continue;
    if ((key === 'messages' || key === 'input') && Array.isArray(value)) {
      sizes.push([key, meter.chars(value)]);
      totalTokens += meter.tokens(value);
      const current = value.findLastIndex((item) => role(item) === 'user' && !isToolResult(item));
      value.forEach((item, i) => {
        if (isToolResult(item)) addItem('tool_results', item);
        else if (isInstruction(item)) addInstruction(item, true);
        else if (i === current) addItem('current_user', item);
        else addItem('history', item);
      });
      continue;
    }
    sizes.push([key, meter.entry(value).chars]);
    totalTokens += meter.aloneTokens(value);
    if (key === 'input' && typeof value === 'string') addValue('current_user', value);
    else if (INSTRUCTION_KEYS.has(key)) addInstruction(value, false);
    else if (SCHEMA_KEYS.has(key)) addValue('tool_schemas', value);
    else addValue('other', value);
  }
  const totalChars = serializedObjectChars(sizes);
  return { totalChars, totalTokens, components: finish(acc, totalChars, totalTokens) };
}

function finish(acc: Acc, totalChars: number, totalTokens: number): Record<Component, ComponentSize> {
  let chars = 0;
  let tokens = 0;
  for (const c of COMPONENTS) {
    if (c === 'framing') continue;
    chars += acc[c].chars;
    tokens += acc[c].tokens;
  }
  acc.framing.chars = Math.max(0, totalChars - chars);
  acc.framing.tokens = Math.max(0, totalTokens - tokens);
  return Object.freeze(
    Object.fromEntries(COMPONENTS.map((c) => [c, Object.freeze({ chars: acc[c].chars, tokens: acc[c].tokens })])),
  ) as Record<Component, ComponentSize>;
}

const role = (item: unknown): unknown => (isObj(item) ? item['role'] : undefined);
const isInstruction = (item: unknown): boolean => INSTRUCTION_ROLES.has(role(item));

function isToolResult(item: unknown): boolean {
  if (!isObj(item)) return false;
  if (item['role'] === 'tool' || item['role'] === 'function') return true;
  if (typeof item['type'] === 'string' && TOOL_ITEM_TYPES.has(item['type'])) return true;
  const content = item['content'];
  return Array.isArray(content) && content.some((p) => isObj(p) && TOOL_ITEM_TYPES.has(String(p['type'])));
}

interface SkillCut {
  readonly rest: string;
  readonly blocks: string[];
  restTokens?: number;
}

/**
 * Instructions with their skill blocks cut out, by value object: what the caller keeps between
 * requests (the runtime one per Terminator, a replay one per request) so an instruction object
 * met again is cut once.
 */
export type SkillCuts = WeakMap<object, SkillCut | null>;

/** An empty {@link SkillCuts}. */
export const createSkillCuts = (): SkillCuts => new WeakMap();

/** The value's canonical JSON with skill blocks removed, and the blocks; undefined when it has none. */
function cutSkills(value: unknown, skillCuts: SkillCuts): SkillCut | undefined {
  if (typeof value === 'object' && value !== null) {
    const known = skillCuts.get(value);
    if (known !== undefined) return known ?? undefined;
  }
  const blocks: string[] = [];
  const strip = (v: unknown): unknown => {
    if (typeof v === 'string') {
      if (!v.includes('<available_skills>')) return v;
      return v.replace(SKILLS, (m) => {
        blocks.push(m);
        return '';
      });
    }
    if (Array.isArray(v)) return v.map(strip);
    if (typeof v === 'object' && v !== null)
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, strip(x)]));
    return v;
  };
  const stripped = strip(value);
  const result: SkillCut | undefined = blocks.length === 0 ? undefined : { rest: canonicalJson(stripped), blocks };
  if (typeof value === 'object' && value !== null) skillCuts.set(value, result ?? null);
  return result;
}
