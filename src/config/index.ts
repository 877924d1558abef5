/**
 * Configuration: every `TOKEN_TERMINATOR_*` and `INCONTEXT_*` variable → one validated, deep-frozen Config.
 *
 * Precedence per field: typed override > new env name > legacy alias (read only when the new name is
 * unset) > default. An empty or whitespace-only env value counts as unset. An invalid value is a
 * startup error (ConfigError) naming the variable, the accepted range and the value received:
 * configuration fails loudly, content always fails open. The data directory (see `Config.dataDir`)
 * follows the XDG base-directory convention, since the library is host-neutral.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { DEFAULT_OBSERVATION_PATTERN } from './observation-pattern.js';
import { PRICING_PROFILE_NAMES } from './pricing.js';
import { HISTORY_POLICIES, type Config, type Mode } from './types.js';
import { PACKAGE_VERSION } from './version.js';
import { TIKTOKEN_ENCODINGS } from '../measure/encoders.js';

export type { Config, Mode } from './types.js';
export { DEFAULT_OBSERVATION_PATTERN } from './observation-pattern.js';
export {
  PRICING_PROFILES,
  PRICING_PROFILE_NAMES,
  applyOverrides,
  pricingFor,
  requestCost,
  routeProfileName,
  validateProfile,
  type PricingProfile,
  type PricingProfileName,
  type PricingSettings,
} from './pricing.js';

/**
 * Every reduction mode: balanced, aggressive, native, terminal, suggest (measures only) and off.
 *
 * @example
 * import { MODES } from 'token-terminator';
 * MODES.includes('suggest'); // true
 */
export const MODES: readonly Mode[] = Object.freeze(['balanced', 'aggressive', 'native', 'terminal', 'suggest', 'off']);
/**
 * Canonical tool names a host tool can be mapped to (TOKEN_TERMINATOR_TOOL_NAMES).
 *
 * @example
 * import { CANONICAL_TOOLS } from 'token-terminator';
 * CANONICAL_TOOLS.includes('terminal'); // true
 */
export const CANONICAL_TOOLS = Object.freeze(['search_files', 'process', 'read_file', 'terminal'] as const);

type IncontextConfig = Config['incontext'];
type Loose<T> = { [K in keyof T]?: T[K] | undefined };
/** Typed options; each one beats its env variable. */
export type ConfigOverrides = Loose<Omit<Config, 'incontext'>> & { incontext?: Loose<IncontextConfig> | undefined };

/** Where {@link loadConfig} reads settings from. */
export interface LoadConfigOptions {
  /** Environment to read. @defaultValue `process.env` */
  env?: Readonly<Record<string, string | undefined>>;
  /** Typed options that beat the environment. @defaultValue none */
  overrides?: ConfigOverrides;
}

/** What each mode turns on (the modes described in the README), already combined with `enabled`. */
export interface ModeFlags {
  /** Terminal commands are actually rewritten through RTK (balanced, aggressive, terminal). */
  readonly terminal: boolean;
  /** Large search_files/process results are compressed natively (balanced, aggressive, native). */
  readonly native: boolean;
  /** read_file results are compressed too (aggressive only). */
  readonly nativeReadFile: boolean;
  /** Request compiler, compactor and evidence capture (balanced, aggressive). */
  readonly compiler: boolean;
  /** Temporal terminal deltas (compiler modes, when TOKEN_TERMINATOR_TEMPORAL_DELTA is on). */
  readonly temporal: boolean;
  /** Measure-only rewrite suggestions; nothing is changed (suggest). */
  readonly suggest: boolean;
  /** The recovery tool is offered (whenever receipts can be produced: native or compiler). */
  readonly recoveryTool: boolean;
}

/**
 * Gating predicates of the modes table. The reference folds `suggest` into its terminal predicate; here it is its own flag.
 *
 * @example
 * const flags = modeFlags(loadConfig());
 */
export function modeFlags(config: Pick<Config, 'enabled' | 'mode' | 'temporalDelta'>): ModeFlags {
  const on = config.enabled;
  const mode = config.mode;
  const compiler = on && (mode === 'balanced' || mode === 'aggressive');
  const native = on && (mode === 'balanced' || mode === 'aggressive' || mode === 'native');
  return Object.freeze({
    terminal: on && (mode === 'balanced' || mode === 'aggressive' || mode === 'terminal'),
    native,
    nativeReadFile: on && mode === 'aggressive',
    compiler,
    temporal: compiler && config.temporalDelta,
    suggest: on && mode === 'suggest',
    recoveryTool: native || compiler,
  });
}

// ---------------------------------------------------------------------------------------------------
// Field kinds: how a raw env string becomes a candidate value, and what a valid value is.

interface Kind {
  /** Accepted range, completing "<NAME> must be …". */
  readonly expects: string;
  readonly schema: z.ZodType;
  /** Raw (trimmed, non-empty) env string → candidate (default: as is); an unparseable one fails the schema. */
  readonly fromEnv?: (raw: string) => unknown;
  /** Applied to env and override candidates alike, before validation. */
  readonly prepare?: (value: unknown) => unknown;
}

const TRUE = new Set(['1', 'true', 'yes', 'on']);
const FALSE = new Set(['0', 'false', 'no', 'off']);
const MAX_INT = Number.MAX_SAFE_INTEGER;
const CONTROL = /[\u0000-\u001f\u007f]/;

const bool: Kind = {
  expects: 'a boolean (1/true/yes/on or 0/false/no/off)',
  schema: z.boolean(),
  fromEnv: (raw) => {
    const v = raw.toLowerCase();
    return TRUE.has(v) ? true : FALSE.has(v) ? false : raw;
  },
};

function int(min: number, max = MAX_INT): Kind {
  return {
    expects: max === MAX_INT ? `an integer ≥ ${min}` : `an integer in ${min}…${max}`,
    schema: z.number().int().min(min).max(max),
    fromEnv: (raw) => (/^[+-]?\d+$/.test(raw) ? Number(raw) : raw),
  };
}

function num(min: number, exclusive = false): Kind {
  const base = z.number().refine(Number.isFinite);
  return {
    expects: `a number ${exclusive ? '>' : '≥'} ${min}`,
    schema: exclusive ? base.refine((n) => n > min) : base.refine((n) => n >= min),
    fromEnv: (raw) => (/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(raw) ? Number(raw) : raw),
  };
}

function oneOf(values: readonly string[]): Kind {
  return {
    expects: `one of ${values.join(', ')}`,
    schema: z.enum(values as [string, ...string[]]),
    fromEnv: (raw) => raw.toLowerCase(),
  };
}

function text(maxChars: number, fallback?: string): Kind {
  return {
    expects: `a string of at most ${maxChars} characters without control characters`,
    schema: z
      .string()
      .max(maxChars)
      .refine((s) => !CONTROL.test(s)),
    prepare: (v) => (typeof v !== 'string' ? v : v.trim() === '' && fallback !== undefined ? fallback : v.trim()),
  };
}

/** Comma-separated list: trimmed, lower-cased, empties dropped; any `all` collapses the list to `['all']`. */
function csv(fallback: readonly string[]): Kind {
  return {
    expects: 'a comma-separated list of names',
    schema: z.array(z.string().refine((s) => !CONTROL.test(s))),
    fromEnv: (raw) => raw.split(','),
    prepare: (v) => {
      if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) return v;
      const items = [...new Set(v.map((x) => x.trim().toLowerCase()).filter((x) => x !== ''))];
      if (items.length === 0) return [...fallback];
      return items.includes('all') ? ['all'] : items;
    },
  };
}

function json(raw: string): unknown {
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return raw;
  }
}

const toolNames: Kind = {
  expects: `a JSON object mapping host tool names to one of ${CANONICAL_TOOLS.join(', ')}`,
  schema: z.record(z.string().min(1), z.enum(CANONICAL_TOOLS)),
  fromEnv: json,
};

const modelLimits: Kind = {
  expects: 'a JSON object mapping model ids to { "contextWindow"?: integer ≥ 1, "maxOutputTokens"?: integer ≥ 1 }',
  schema: z.record(
    z.string().trim().min(1),
    z.strictObject({
      contextWindow: z.number().int().min(1).optional(),
      maxOutputTokens: z.number().int().min(1).optional(),
    }),
  ),
  fromEnv: json,
};

/** A URL with a protocol `protocol` accepts, or empty. */
function urlKind(expects: string, protocol: RegExp): Kind {
  return {
    expects,
    schema: z.string().refine((s) => {
      if (s === '') return true;
      try {
        return protocol.test(new URL(s).protocol);
      } catch {
        return false;
      }
    }),
  };
}

const httpUrl = urlKind('an http(s) URL or empty', /^https?:$/);

/** A PostgreSQL connection string (postgres:// or postgresql://), or empty for the SQLite file. */
const postgresUrl: Kind = {
  ...urlKind('a postgres:// or postgresql:// connection string, or empty', /^postgres(ql)?:$/),
  prepare: (v) => (typeof v === 'string' ? v.trim() : v),
};

const backendName: Kind = {
  expects: 'a backend name (lower-case letters, digits, ".", "_", "-")',
  schema: z.string().regex(/^[a-z0-9][a-z0-9_.-]{0,63}$/),
  fromEnv: (raw) => raw.toLowerCase(),
};

/** A number within [0, 1]. */
const fraction: Kind = {
  ...num(0),
  expects: 'a number within 0…1',
  schema: z.number().refine((n) => Number.isFinite(n) && n >= 0 && n <= 1),
};

/** A JavaScript regular expression source (compiled once here, so a bad pattern fails at startup), or `none`. */
const regex: Kind = {
  expects: 'a JavaScript regular expression (or none)',
  schema: z
    .string()
    .max(2000)
    .refine((s) => {
      if (s === 'none') return true;
      try {
        new RegExp(s, 'u');
        return true;
      } catch {
        return false;
      }
    }),
};

/** A file path; `~` is expanded at load time and relative paths resolved against the working directory. */
const path: Kind = {
  expects: 'a file path without control characters',
  schema: z.string().refine((s) => !CONTROL.test(s)),
};

// ---------------------------------------------------------------------------------------------------
// The field table. `key` is the Config field ("incontext.x" for nested ones).

interface Field {
  readonly key: string;
  readonly env: string;
  readonly kind: Kind;
  /** Undefined default = computed after the other fields (data-dir paths, incontext backend, user agent). */
  readonly fallback: unknown;
  /** Older names, read only when `env` is unset. */
  readonly legacy?: readonly string[];
  /** Expand `~` and resolve relative paths. */
  readonly isPath?: boolean;
  /** Never echo the value in an error (it may hold a password). */
  readonly secret?: boolean;
}

const TT = 'TOKEN_TERMINATOR_';
const OLD = 'RTK_HERMES_PLUS_';

function tt(
  key: string,
  suffix: string,
  kind: Kind,
  fallback: unknown,
  extra: { legacy?: true; isPath?: true } = {},
): Field {
  return {
    key,
    env: TT + suffix,
    kind,
    fallback,
    ...(extra.isPath ? { isPath: true } : {}),
    ...(extra.legacy ? { legacy: [OLD + suffix] } : {}),
  };
}

/** An `incontext.*` field: its variable is `INCONTEXT_` and the key in upper snake case. */
function ic(key: string, kind: Kind, fallback: unknown, legacy?: string): Field {
  const env = `INCONTEXT_${key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
  return { key: `incontext.${key}`, env, kind, fallback, ...(legacy === undefined ? {} : { legacy: [legacy] }) };
}

const FIELDS: readonly Field[] = [
  tt('enabled', 'ENABLED', bool, true),
  tt('mode', 'MODE', oneOf(MODES), 'balanced', { legacy: true }),
  tt('timeoutMs', 'TIMEOUT_MS', int(50), 500, { legacy: true }),
  tt('backends', 'BACKENDS', csv(['local']), ['local'], { legacy: true }),
  tt('rtkPath', 'RTK_PATH', path, ''),
  tt('cacheTtlSeconds', 'CACHE_TTL', int(1), 600, { legacy: true }),
  tt('cacheSize', 'CACHE_SIZE', int(1), 512, { legacy: true }),
  tt('temporalDelta', 'TEMPORAL_DELTA', bool, true),
  tt('temporalMinChars', 'TEMPORAL_MIN_CHARS', int(1), 2000),
  tt('temporalScope', 'TEMPORAL_SCOPE', oneOf(['session', 'workspace']), 'session'),
  tt('nativeMinChars', 'NATIVE_MIN_CHARS', int(1000), 12000, { legacy: true }),
  tt('nativeMaxChars', 'NATIVE_MAX_CHARS', int(1000), 8000, { legacy: true }),
  tt('dbPath', 'DB_PATH', path, undefined, { isPath: true }),
  tt('minArtifactChars', 'MIN_ARTIFACT_CHARS', int(1), 4000),
  tt('maxArtifactChars', 'MAX_ARTIFACT_CHARS', int(1, 50_000_000), 2_000_000),
  tt('vaultMaxBytes', 'VAULT_MAX_BYTES', int(1, 100_000_000_000), 536_870_912),
  tt('vaultHighWaterPct', 'VAULT_HIGH_WATER_PCT', int(1, 100), 90),
  tt('vaultLowWaterPct', 'VAULT_LOW_WATER_PCT', int(0, 99), 80),
  tt('busyTimeoutMs', 'BUSY_TIMEOUT_MS', int(0, 60_000), 10_000),
  tt('sessionTtlSeconds', 'SESSION_TTL_SECONDS', int(60, 31_536_000), 21_600),
  tt('searchDeadlineMs', 'SEARCH_DEADLINE_MS', int(10, 60_000), 2000),
  { ...tt('dbUrl', 'DB_URL', postgresUrl, ''), secret: true },
  tt('dbPoolSize', 'DB_POOL_SIZE', int(1, 1000), 10),
  tt('dbStatementTimeoutMs', 'DB_STATEMENT_TIMEOUT_MS', int(0, 3_600_000), 30_000),
  tt('inlineLeases', 'INLINE_LEASES', int(0, 100), 1),
  tt('maxPageChars', 'MAX_PAGE_CHARS', int(1), 20000),
  tt('maxSearchResults', 'MAX_SEARCH_RESULTS', int(1, 500), 50),
  tt('workingGraphChars', 'WORKING_GRAPH_CHARS', int(0), 0),
  tt('tokenBudget', 'TOKEN_BUDGET', bool, true),
  tt('outputCap', 'OUTPUT_CAP', bool, true),
  tt('windowFit', 'WINDOW_FIT', bool, true),
  tt('windowLowWaterPct', 'WINDOW_LOW_WATER_PCT', int(10, 100), 70),
  tt('windowFitOrder', 'WINDOW_FIT_ORDER', csv(['reasoning', 'view', 'digest-idle', 'digest', 'receipt']), [
    'reasoning',
    'digest-idle',
    'view',
    'receipt',
  ]),
  tt('modelLimits', 'MODEL_LIMITS', modelLimits, {}),
  tt('tokenizerJson', 'TOKENIZER_JSON', path, '', { isPath: true }),
  tt('tiktokenEncoding', 'TIKTOKEN_ENCODING', oneOf(['', ...TIKTOKEN_ENCODINGS]), ''),
  tt('contextCompaction', 'CONTEXT_COMPACTION', bool, true),
  tt('contextMinVaultChars', 'CONTEXT_MIN_VAULT_CHARS', int(100), 600),
  tt('contextCollapseAfterTurns', 'CONTEXT_COLLAPSE_AFTER_TURNS', int(0), 0),
  tt('contextInlineRecentTurns', 'CONTEXT_INLINE_RECENT_TURNS', int(1), 1),
  tt('contextBlockTurns', 'CONTEXT_BLOCK_TURNS', int(0, 1000), 0),
  tt('rewriteHorizonRequests', 'REWRITE_HORIZON_REQUESTS', int(0, 100_000), 0),
  tt('historyPolicy', 'HISTORY_POLICY', oneOf(HISTORY_POLICIES), 'working-set'),
  tt('workingSetIdleTurns', 'WORKING_SET_IDLE_TURNS', int(1, 1000), 1),
  tt('digestDiagnosticChars', 'DIGEST_DIAGNOSTIC_CHARS', int(0, 20_000), 400),
  tt('reasoningReduction', 'REASONING_REDUCTION', bool, false),
  tt('observationPattern', 'OBSERVATION_PATTERN', regex, DEFAULT_OBSERVATION_PATTERN),
  tt('skillRouting', 'SKILL_ROUTING', bool, false),
  tt('pricingProfile', 'PRICING_PROFILE', oneOf(['auto', ...PRICING_PROFILE_NAMES]), 'auto'),
  tt('cacheReadMultiplier', 'CACHE_READ_MULTIPLIER', fraction, undefined),
  tt('cacheWriteMultiplier', 'CACHE_WRITE_MULTIPLIER', num(1), undefined),
  tt('minCachePrefixTokens', 'MIN_CACHE_PREFIX_TOKENS', int(0, 1_000_000), undefined),
  tt('maxInlineChars', 'MAX_INLINE_CHARS', int(0, 50_000_000), 32_000),
  tt('previewMarker', 'PREVIEW_MARKER', bool, false, { legacy: true }),
  tt('contextLimitTokens', 'CONTEXT_LIMIT_TOKENS', int(0), 0),
  tt('outputReserveTokens', 'OUTPUT_RESERVE_TOKENS', int(0), 4096),
  tt('tokenSafetyMargin', 'TOKEN_SAFETY_MARGIN', int(0), 512),
  tt('ledger', 'LEDGER', bool, true, { legacy: true }),
  tt('ledgerPath', 'LEDGER_PATH', path, undefined, { isPath: true, legacy: true }),
  tt('experiment', 'EXPERIMENT', text(80, 'default'), 'default', { legacy: true }),
  tt('exclude', 'EXCLUDE', csv([]), [], { legacy: true }),
  tt('pytestGuard', 'PYTEST_GUARD', bool, true, { legacy: true }),
  tt('eqInputUsdPerM', 'EQ_INPUT_USD_PER_M', num(0), 0, { legacy: true }),
  tt('eqOutputUsdPerM', 'EQ_OUTPUT_USD_PER_M', num(0), 0, { legacy: true }),
  tt('eqCacheReadUsdPerM', 'EQ_CACHE_READ_USD_PER_M', num(0), 0, { legacy: true }),
  tt('eqCacheWriteUsdPerM', 'EQ_CACHE_WRITE_USD_PER_M', num(0), 0, { legacy: true }),
  tt('eqRateCard', 'EQ_RATE_CARD', text(120), '', { legacy: true }),
  tt('toolNames', 'TOOL_NAMES', toolNames, {}),
  { key: 'dataDir', env: 'TOKEN_TERMINATOR_HOME', kind: path, fallback: undefined, isPath: true },
  ic('tokenizerUrl', httpUrl, '', 'HERMES_VLLM_TOKENIZER_URL'),
  // Backend comes after the URL: its default depends on whether a URL is set.
  ic('backend', backendName, undefined),
  ic('tokenizerTimeoutSeconds', num(0, true), 30, 'HERMES_VLLM_TOKENIZER_TIMEOUT_SECONDS'),
  ic('tokenizerUserAgent', text(200), undefined, 'HERMES_VLLM_TOKENIZER_USER_AGENT'),
  ic('fallbackMarginTokens', int(0), 1024, 'HERMES_DYNAMIC_BUDGET_FALLBACK_MARGIN_TOKENS'),
  ic('minOutputTokens', int(1), 4096),
  ic('compressionWindowTokens', int(1), undefined),
];

/**
 * The default of every top-level config field, by key: the one table the operators' own
 * defaults are read from, so an operator built without an option behaves as the runtime's default.
 *
 * @example
 * import { CONFIG_DEFAULTS } from 'token-terminator';
 * CONFIG_DEFAULTS['mode']; // 'balanced'
 */
export const CONFIG_DEFAULTS: Readonly<Record<string, unknown>> = Object.freeze(
  Object.fromEntries(FIELDS.filter((f) => !f.key.includes('.')).map((f) => [f.key, f.fallback])),
);

/**
 * The integer default of a config field (see {@link CONFIG_DEFAULTS}).
 *
 * @example
 * const pageChars = defaultInt('maxPageChars');
 */
export function defaultInt(key: keyof Config): number {
  const value = CONFIG_DEFAULTS[key];
  if (typeof value !== 'number') throw new TypeError(`config field ${key} has no numeric default`);
  return value;
}

/**
 * Every variable this loader reads (new names first, then legacy aliases), for docs and `status`.
 *
 * @example
 * import { CONFIG_VARIABLES } from 'token-terminator';
 * const set = CONFIG_VARIABLES.filter((name) => process.env[name] !== undefined);
 */
export const CONFIG_VARIABLES: readonly string[] = Object.freeze([
  ...FIELDS.map((f) => f.env),
  ...FIELDS.flatMap((f) => f.legacy ?? []),
]);

// ---------------------------------------------------------------------------------------------------

function show(value: unknown): string {
  let s: string;
  try {
    s = typeof value === 'string' ? JSON.stringify(value) : (JSON.stringify(value) ?? String(value));
  } catch {
    s = String(value);
  }
  return s.length > 120 ? `${s.slice(0, 117)}...` : s;
}

function readOverride(overrides: ConfigOverrides, key: string): unknown {
  if (key.startsWith('incontext.'))
    return (overrides.incontext as Record<string, unknown> | undefined)?.[key.slice(10)];
  return (overrides as Record<string, unknown>)[key];
}

function checkOverrideKeys(overrides: ConfigOverrides): void {
  const known = new Set(FIELDS.map((f) => f.key));
  for (const key of Object.keys(overrides)) {
    if (key === 'incontext') continue;
    if (!known.has(key)) throw new ConfigError(`unknown configuration option "${key}"`);
  }
  const nested = overrides.incontext;
  if (nested !== undefined) {
    if (typeof nested !== 'object' || nested === null) throw new ConfigError('option incontext must be an object');
    for (const key of Object.keys(nested)) {
      if (!known.has(`incontext.${key}`)) throw new ConfigError(`unknown configuration option "incontext.${key}"`);
    }
  }
}

function expandPath(value: string, home: string): string {
  if (value === '' || value === ':memory:') return value;
  const expanded = value === '~' ? home : value.startsWith('~/') ? join(home, value.slice(2)) : value;
  return resolve(expanded);
}

function defaultDataDir(env: Readonly<Record<string, string | undefined>>, home: string): string {
  const xdg = env['XDG_DATA_HOME']?.trim();
  if (xdg && isAbsolute(xdg)) return join(xdg, 'token-terminator');
  const localAppData = env['LOCALAPPDATA']?.trim();
  if (process.platform === 'win32' && localAppData) return join(localAppData, 'token-terminator');
  return join(home, '.local', 'share', 'token-terminator');
}

/**
 * Freeze `value` and every object reachable from it (a config, a built-in table); returns it.
 *
 * @example
 * const table = deepFreeze({ 'gpt-4o': { contextWindow: 128_000 } }); // table['gpt-4o'] is frozen too
 */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/**
 * Read every variable (see the module comment for precedence and the data directory).
 *
 * @throws ConfigError naming the variable (or option), the accepted range and the value received.
 * @example
 * const config = loadConfig({ env: process.env, overrides: { mode: 'aggressive' } });
 * modeFlags(config).nativeReadFile; // true
 */
export function loadConfig(options: LoadConfigOptions = {}): Config {
  const env = options.env ?? process.env;
  const overrides = options.overrides ?? {};
  checkOverrideKeys(overrides);
  const home = env['HOME']?.trim() || homedir();
  const flat = new Map<string, unknown>();

  for (const field of FIELDS) {
    let candidate: unknown;
    let shown: unknown;
    let label: string;
    const override = readOverride(overrides, field.key);
    if (override !== undefined) {
      candidate = override;
      shown = override;
      label = `option ${field.key} (${field.env})`;
    } else {
      const name = [field.env, ...(field.legacy ?? [])].find((n) => (env[n] ?? '').trim() !== '');
      if (name === undefined) {
        flat.set(field.key, field.fallback);
        continue;
      }
      const raw = (env[name] ?? '').trim();
      candidate = field.kind.fromEnv ? field.kind.fromEnv(raw) : raw;
      shown = raw;
      label = name;
    }
    const prepared = field.kind.prepare ? field.kind.prepare(candidate) : candidate;
    const parsed = field.kind.schema.safeParse(prepared);
    if (!parsed.success)
      throw new ConfigError(
        `${label} must be ${field.kind.expects}, got ${field.secret ? '(value not shown: it may hold a password)' : show(shown)}`,
      );
    const value = field.isPath && typeof parsed.data === 'string' ? expandPath(parsed.data, home) : parsed.data;
    // Read when the first counter is built, deep inside a request: a missing file is a startup error here.
    if (field.key === 'tokenizerJson' && value !== '' && !existsSync(value as string))
      throw new ConfigError(`${label} names no file: ${show(shown)} (expected a tokenizer.json path)`);
    flat.set(field.key, value);
  }

  const dataDir = (flat.get('dataDir') as string | undefined) ?? defaultDataDir(env, home);
  const top: Record<string, unknown> = {};
  const incontext: Record<string, unknown> = {};
  for (const [key, value] of flat)
    if (key.startsWith('incontext.')) incontext[key.slice('incontext.'.length)] = value;
    else top[key] = value;
  incontext['backend'] ??= incontext['tokenizerUrl'] !== '' ? 'vllm' : 'tiktoken';
  incontext['tokenizerUserAgent'] ||= `token-terminator/${PACKAGE_VERSION}`;
  top['dataDir'] = dataDir;
  top['dbPath'] ??= join(dataDir, 'artifacts.sqlite3');
  top['ledgerPath'] ??= join(dataDir, 'experiments.sqlite3');
  const config = { ...top, incontext } as unknown as Config;
  crossCheck(config);
  return deepFreeze(config);
}

function crossCheck(c: Config): void {
  if (c.minArtifactChars > c.maxArtifactChars) {
    throw new ConfigError(
      `${TT}MIN_ARTIFACT_CHARS (${c.minArtifactChars}) must be ≤ ${TT}MAX_ARTIFACT_CHARS (${c.maxArtifactChars})`,
    );
  }
  if (c.contextCollapseAfterTurns !== 0 && c.contextCollapseAfterTurns < c.contextInlineRecentTurns) {
    throw new ConfigError(
      `${TT}CONTEXT_COLLAPSE_AFTER_TURNS (${c.contextCollapseAfterTurns}) must be 0 (off) or ≥ ` +
        `${TT}CONTEXT_INLINE_RECENT_TURNS (${c.contextInlineRecentTurns})`,
    );
  }
  if (c.vaultLowWaterPct >= c.vaultHighWaterPct) {
    throw new ConfigError(
      `${TT}VAULT_LOW_WATER_PCT (${c.vaultLowWaterPct}) must be < ${TT}VAULT_HIGH_WATER_PCT (${c.vaultHighWaterPct})`,
    );
  }
  checkContextLimit(c, {
    reserve: `${TT}OUTPUT_RESERVE_TOKENS`,
    margin: `${TT}TOKEN_SAFETY_MARGIN`,
    limit: `${TT}CONTEXT_LIMIT_TOKENS`,
  });
  if (c.incontext.backend === 'vllm' && c.incontext.tokenizerUrl === '') {
    throw new ConfigError('INCONTEXT_BACKEND=vllm requires INCONTEXT_TOKENIZER_URL (the /tokenize endpoint)');
  }
}

/** How {@link checkContextLimit} names the three settings: as variables (config) or as an API's options. */
export interface ContextLimitNames {
  readonly reserve: string;
  readonly margin: string;
  readonly limit: string;
  /** The API whose options these are (the message starts `api: `). */
  readonly api?: string;
  /** Appended to the message (the variables behind an API's options). */
  readonly hint?: string;
}

/**
 * A context limit (0 = none) must leave room for the output reserve plus the safety margin.
 *
 * @throws ConfigError `<reserve> + <margin> (r + m) must be below <limit> (l)`, in the given names.
 * @example
 * const names = { reserve: 'outputReserveTokens', margin: 'tokenSafetyMargin', limit: 'contextLimitTokens' };
 * checkContextLimit({ contextLimitTokens: 128_000, outputReserveTokens: 8_000, tokenSafetyMargin: 512 }, names); // passes
 * checkContextLimit({ contextLimitTokens: 8_000, outputReserveTokens: 8_000, tokenSafetyMargin: 0 }, names); // throws ConfigError
 */
export function checkContextLimit(
  c: Pick<Config, 'contextLimitTokens' | 'outputReserveTokens' | 'tokenSafetyMargin'>,
  names: ContextLimitNames,
): void {
  if (c.contextLimitTokens > 0 && c.outputReserveTokens + c.tokenSafetyMargin >= c.contextLimitTokens)
    throw new ConfigError(
      `${names.api === undefined ? '' : `${names.api}: `}${names.reserve} + ${names.margin} ` +
        `(${c.outputReserveTokens} + ${c.tokenSafetyMargin}) must be below ${names.limit} (${c.contextLimitTokens})` +
        (names.hint ?? ''),
    );
}

/**
 * Where the experiment ledger is: TOKEN_TERMINATOR_LEDGER_PATH when it was set, else
 * `experiments.sqlite3` beside the vault (so a vault moved with TOKEN_TERMINATOR_DB_PATH or `--db`
 * keeps its ledger next to it, as `replay` does).
 *
 * @example
 * import { loadConfig } from 'token-terminator';
 * const ledgerPath = effectiveLedgerPath(loadConfig()); // beside the vault unless set explicitly
 */
export function effectiveLedgerPath(config: Pick<Config, 'dataDir' | 'dbPath' | 'ledgerPath'>): string {
  const dataDirDefault = join(config.dataDir, 'experiments.sqlite3');
  if (config.ledgerPath !== dataDirDefault || config.dbPath === '' || config.dbPath === ':memory:')
    return config.ledgerPath;
  return join(dirname(config.dbPath), 'experiments.sqlite3');
}
