/**
 * Context window and maximum output of known models, so an output cap is never above what the model
 * accepts even when the host gives only a model name (a cap above the ceiling is a 400).
 *
 * Figures are the providers' published limits (sources in docs/model-limits.md). Lookup is by
 * canonical id (provider prefixes, Bedrock and Vertex decorations, OpenRouter variants and dated
 * snapshots stripped); a still unknown id takes the entry of its longest known `-`-prefix, marked
 * `inferredFrom`, which never lowers what the caller asked for. Overrides (config `modelLimits`,
 * then the route's own fields) win over the table.
 */
import { deepFreeze } from '../config/index.js';
import { ConfigError } from '../errors.js';

/** What a model accepts, in tokens. */
export interface ModelLimits {
  /** Prompt plus output. */
  readonly contextWindow?: number;
  /** The model's own ceiling on one response; absent = only the window limits it (self-hosted open-weight models). */
  readonly maxOutputTokens?: number;
  /**
   * Set by a lookup when the id is not in the table and these are the limits of its longest known
   * `-`-prefix (`claude-opus-4-8` → `claude-opus-4`): a guess, which never lowers a cap the caller
   * asked for. Never set in a table.
   */
  readonly inferredFrom?: string;
}

/** Model id → limits; keys are matched after the same canonicalization as request ids. */
export type ModelLimitsTable = Readonly<Record<string, ModelLimits>>;

const K = 1000;
const KI = 1024;

function both(contextWindow: number, maxOutputTokens: number): ModelLimits {
  return { contextWindow, maxOutputTokens };
}

/**
 * The built-in table.
 *
 * @example
 * import { BUILT_IN_MODEL_LIMITS } from 'token-terminator';
 * BUILT_IN_MODEL_LIMITS['gpt-4o']; // { contextWindow: 128000, maxOutputTokens: 16384 }
 */
export const BUILT_IN_MODEL_LIMITS: ModelLimitsTable = deepFreeze({
  // OpenAI
  'gpt-4o': both(128 * K, 16_384),
  'gpt-4o-2024-05-13': both(128 * K, 4096),
  'chatgpt-4o': both(128 * K, 16_384),
  'gpt-4o-mini': both(128 * K, 16_384),
  'gpt-4.1': both(1_047_576, 32_768),
  'gpt-4.1-mini': both(1_047_576, 32_768),
  'gpt-4.1-nano': both(1_047_576, 32_768),
  'gpt-4-turbo': both(128 * K, 4096),
  'gpt-4-1106-preview': both(128 * K, 4096),
  'gpt-4-0125-preview': both(128 * K, 4096),
  'gpt-4': both(8192, 8192),
  'gpt-3.5-turbo': both(16_385, 4096),
  o1: both(200 * K, 100 * K),
  'o1-mini': both(128 * K, 65_536),
  'o1-preview': both(128 * K, 32_768),
  o3: both(200 * K, 100 * K),
  'o3-mini': both(200 * K, 100 * K),
  'o3-pro': both(200 * K, 100 * K),
  'o4-mini': both(200 * K, 100 * K),
  'codex-mini': both(200 * K, 100 * K),
  'gpt-5': both(400 * K, 128 * K),
  'gpt-5-mini': both(400 * K, 128 * K),
  'gpt-5-nano': both(400 * K, 128 * K),
  'gpt-5-chat': both(128 * K, 16_384),
  'gpt-5-codex': both(400 * K, 128 * K),
  // OpenAI open-weight
  'gpt-oss-120b': both(131_072, 131_072),
  'gpt-oss-20b': both(131_072, 131_072),
  // Anthropic
  'claude-fable-5-1': both(1_000_000, 128 * K),
  'claude-fable-5': both(1_000_000, 128 * K),
  'claude-opus-5-5': both(1_000_000, 128 * K),
  'claude-opus-5': both(1_000_000, 128 * K),
  'claude-sonnet-5': both(1_000_000, 128 * K),
  'claude-opus-4-8': both(1_000_000, 128 * K),
  'claude-opus-4-7': both(1_000_000, 128 * K),
  'claude-opus-4-6': both(1_000_000, 128 * K),
  'claude-sonnet-4-6': both(1_000_000, 128 * K),
  'claude-opus-4-5': both(200 * K, 64 * K),
  'claude-sonnet-4-5': both(200 * K, 64 * K),
  'claude-haiku-4-5': both(200 * K, 64 * K),
  'claude-opus-4-1': both(200 * K, 32 * K),
  'claude-opus-4': both(200 * K, 32 * K),
  'claude-sonnet-4': both(200 * K, 64 * K),
  'claude-3-7-sonnet': both(200 * K, 64 * K),
  'claude-3-5-sonnet': both(200 * K, 8192),
  'claude-3-5-haiku': both(200 * K, 8192),
  'claude-3-opus': both(200 * K, 4096),
  'claude-3-haiku': both(200 * K, 4096),
  // Google
  'gemini-3-pro': both(1_048_576, 65_536),
  'gemini-2.5-pro': both(1_048_576, 65_536),
  'gemini-2.5-flash': both(1_048_576, 65_536),
  'gemini-2.5-flash-lite': both(1_048_576, 65_536),
  'gemini-2.0-flash': both(1_048_576, 8192),
  'gemini-2.0-flash-lite': both(1_048_576, 8192),
  'gemini-1.5-pro': both(2_097_152, 8192),
  'gemini-1.5-flash': both(1_048_576, 8192),
  'gemma-3-27b-it': both(128 * KI, 8192),
  // Open-weight models as served by their own engines (vLLM, TGI, llama.cpp): the window is the only limit
  'llama-3.3-70b-instruct': { contextWindow: 131_072 },
  'llama-3.1-405b-instruct': { contextWindow: 131_072 },
  'llama-3.1-70b-instruct': { contextWindow: 131_072 },
  'llama-3.1-8b-instruct': { contextWindow: 131_072 },
  'qwen2.5-72b-instruct': both(32_768, 8192),
  'qwen2.5-coder-32b-instruct': both(32_768, 8192),
  'qwen3-32b': { contextWindow: 32_768 },
  'qwen3-235b-a22b': { contextWindow: 32_768 },
  'qwen3-235b-a22b-instruct-2507': both(262_144, 262_144),
  'qwen3-coder-480b-a35b-instruct': both(262_144, 262_144),
  'mistral-large-instruct-2411': { contextWindow: 131_072 },
  'mixtral-8x7b-instruct-v0.1': { contextWindow: 32_768 },
  // DeepSeek's open-weight V3.x and R1 behind its own API (the API enforces the output ceiling)
  'deepseek-chat': both(128 * K, 8192),
  'deepseek-reasoner': both(128 * K, 65_536),
  'deepseek-v3': { contextWindow: 131_072 },
  'deepseek-r1': { contextWindow: 131_072 },
});

/** `openai:gpt-4o` (LangChain's initChatModel form) and similar provider tags. */
const PROVIDER_TAGS = new Set([
  'openai',
  'azure_openai',
  'azure',
  'anthropic',
  'google',
  'google-genai',
  'google-vertexai',
  'google_genai',
  'google_vertexai',
  'vertex',
  'vertexai',
  'gemini',
  'bedrock',
  'groq',
  'mistral',
  'mistralai',
  'deepseek',
  'together',
  'fireworks',
  'openrouter',
  'xai',
  'cohere',
  'vllm',
  'ollama',
]);

const BEDROCK =
  /^(?:(?:us|eu|apac|global|au|jp|ca|us-gov)\.)?(?:anthropic|meta|mistral|amazon|cohere|deepseek|openai|qwen)\./;
const DATE_SUFFIX = /-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|latest)$/;

/**
 * The canonical form of a model id: lower-case, without provider prefixes and platform decorations.
 *
 * @example
 * canonicalModelId('us.anthropic.claude-sonnet-4-5-20250929-v1:0'); // 'claude-sonnet-4-5-20250929'
 * canonicalModelId('openai:gpt-4o'); // 'gpt-4o'
 */
export function canonicalModelId(id: string): string {
  let s = id.trim().toLowerCase();
  const colon = /^([a-z][a-z0-9_.-]*):(.+)$/.exec(s);
  if (colon !== null && PROVIDER_TAGS.has(colon[1]!)) s = colon[2]!;
  s = s.slice(s.lastIndexOf('/') + 1);
  if (BEDROCK.test(s))
    s = s
      .replace(BEDROCK, '')
      .replace(/-v\d+(?::\d+)?$/, '')
      .replace(/:\d+$/, '');
  s = s.replace(/@.*$/, '');
  if (s.startsWith('meta-llama-')) s = s.slice('meta-'.length);
  // OpenRouter variants (`:thinking`, `:free`, `:beta`); Ollama tags keep their meaning, so only known ones go.
  s = s.replace(/:(?:thinking|free|beta|extended|nitro|floor|online)$/, '');
  // OpenRouter spells Claude versions with dots (`claude-sonnet-4.5`, `claude-3.7-sonnet`).
  if (s.startsWith('claude-')) s = s.replace(/(\d)\.(\d)/g, '$1-$2');
  return s;
}

function normalizedTable(table: ModelLimitsTable | undefined): Map<string, ModelLimits> {
  return new Map(Object.entries(table ?? {}).map(([key, limits]) => [canonicalModelId(key), limits]));
}

/** An id without its separators: `gpt4o` and `gpt-4o` name the same model. */
const squashed = (id: string): string => id.replace(/[-._\s]/g, '');

function find(table: ReadonlyMap<string, ModelLimits>, id: string): ModelLimits | undefined {
  const exact = table.get(id) ?? table.get(id.replace(DATE_SUFFIX, ''));
  if (exact !== undefined) return exact;
  let best: string | undefined;
  for (const key of table.keys()) {
    if (id.startsWith(`${key}-`) && (best === undefined || key.length > best.length)) best = key;
  }
  // Spelled without (or with other) separators: a guess as well, so `gpt4o` is capped as `gpt-4o-typo` is.
  if (best === undefined) {
    const flat = squashed(id.replace(DATE_SUFFIX, ''));
    for (const key of table.keys()) if (squashed(key) === flat) best = key;
  }
  return best === undefined ? undefined : Object.freeze({ ...table.get(best), inferredFrom: best });
}

/** Edit distance of two short strings (model ids), for the nearest-id hint. */
function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++)
      next.push(Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)));
    row = next;
  }
  return row[b.length]!;
}

/**
 * What a user should know about a model id the built-in table does not list, or undefined when it
 * lists it: the limits of a similar id are used (`inferredFrom`), or none are known and the output
 * cap cannot be set, with the nearest known id when one is close. Content-free: ids only.
 *
 * @example
 * modelLimitsHint('gpt4o'); // 'model "gpt4o" is not in the built-in limits table: the limits of "gpt-4o" are used …'
 */
export function modelLimitsHint(
  model: string,
  limits: ModelLimits | undefined = lookupModelLimits(model),
): string | undefined {
  const fix = 'give its limits in TOKEN_TERMINATOR_MODEL_LIMITS (docs/model-limits.md)';
  if (limits?.inferredFrom !== undefined)
    return `model "${model}" is not in the built-in limits table: the limits of "${limits.inferredFrom}" are used as a guess; if that is not the model, ${fix}`;
  if (limits !== undefined) return undefined;
  const id = canonicalModelId(model);
  let nearest: string | undefined;
  let best = Infinity;
  for (const key of builtIn.keys()) {
    const d = distance(squashed(id), squashed(key));
    if (d < best) [best, nearest] = [d, key];
  }
  const close = nearest !== undefined && best <= Math.max(2, Math.floor(id.length / 4));
  return `model "${model}" is not in the built-in limits table, so no output cap is set${close ? ` (did you mean "${nearest}"?)` : ''}; ${fix}`;
}

const builtIn = normalizedTable(BUILT_IN_MODEL_LIMITS);

/** A lookup over the built-in table with overrides on top (an override may set one field only). */
export interface ModelLimitsLookup {
  (model: string | undefined): ModelLimits | undefined;
}

/**
 * Build a lookup. Overrides are matched first (raw lower-cased key, then canonical), field by field
 * over the built-in entry; pass `builtIns: false` to use the overrides alone.
 *
 * @example
 * const limits = createModelLimits({ 'my-finetune': { contextWindow: 32_768, maxOutputTokens: 4096 } });
 * limits('openai/gpt-4o'); // { contextWindow: 128000, maxOutputTokens: 16384 }
 */
export function createModelLimits(
  overrides?: ModelLimitsTable,
  options: { readonly builtIns?: boolean } = {},
): ModelLimitsLookup {
  if (overrides !== undefined) checkModelLimits('modelLimits', overrides);
  const raw = new Map(Object.entries(overrides ?? {}).map(([k, v]) => [k.trim().toLowerCase(), v] as const));
  const mine = normalizedTable(overrides);
  const base = options.builtIns === false ? new Map<string, ModelLimits>() : builtIn;
  const cache = new Map<string, ModelLimits | undefined>();
  return (model) => {
    if (model === undefined || model.trim() === '') return undefined;
    if (cache.has(model)) return cache.get(model);
    const id = canonicalModelId(model);
    const own = raw.get(model.trim().toLowerCase()) ?? find(mine, id);
    const known = find(base, id);
    // An override for exactly this id replaces a guess from a similar name rather than completing it.
    const merged =
      own === undefined
        ? known
        : known === undefined || (known.inferredFrom !== undefined && own.inferredFrom === undefined)
          ? own
          : { ...known, ...own };
    if (cache.size >= 256) cache.delete(cache.keys().next().value as string);
    cache.set(model, merged);
    return merged;
  };
}

/**
 * The built-in lookup without overrides.
 *
 * @example
 * import { lookupModelLimits } from 'token-terminator';
 * const limits = lookupModelLimits('gpt-4o'); // { contextWindow: 128000, maxOutputTokens: 16384 }
 */
export const lookupModelLimits: ModelLimitsLookup = createModelLimits();

/**
 * ConfigError naming `who` for a table entry that is not `{ contextWindow?, maxOutputTokens? }` of positive integers.
 *
 * @example
 * const table: unknown = JSON.parse('{"my-model":{"contextWindow":32768}}');
 * checkModelLimits('MODEL_LIMITS', table); // table is a ModelLimitsTable from here on
 */
export function checkModelLimits(who: string, table: unknown): asserts table is ModelLimitsTable {
  if (table === null || typeof table !== 'object' || Array.isArray(table))
    throw new ConfigError(`${who} must be an object mapping model ids to { contextWindow?, maxOutputTokens? }`);
  for (const [model, limits] of Object.entries(table as Record<string, unknown>)) {
    if (model.trim() === '') throw new ConfigError(`${who}: empty model id`);
    if (limits === null || typeof limits !== 'object' || Array.isArray(limits))
      throw new ConfigError(`${who}["${model}"] must be an object`);
    for (const [field, value] of Object.entries(limits as Record<string, unknown>)) {
      if (field !== 'contextWindow' && field !== 'maxOutputTokens')
        throw new ConfigError(`${who}["${model}"]: unknown field "${field}" (contextWindow, maxOutputTokens)`);
      if (!Number.isSafeInteger(value) || (value as number) < 1)
        throw new ConfigError(`${who}["${model}"].${field} must be an integer ≥ 1 (got ${String(value)})`);
    }
  }
}
