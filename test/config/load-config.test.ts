import { join, resolve } from 'node:path';
import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES, DEFAULT_OBSERVATION_PATTERN, loadConfig, modeFlags, MODES } from '../../src/config/index.js';
import { ConfigError } from '../../src/errors.js';

const HOME = '/home/tester';
const base = { HOME } as const;
const load = (env: Record<string, string> = {}) => loadConfig({ env: { ...base, ...env } });

function errorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig defaults', () => {
  it('uses the seed defaults for every field', () => {
    const c = load();
    expect(c).toMatchObject({
      enabled: true,
      mode: 'balanced',
      timeoutMs: 500,
      backends: ['local'],
      rtkPath: '',
      cacheTtlSeconds: 600,
      cacheSize: 512,
      temporalDelta: true,
      temporalMinChars: 2000,
      temporalScope: 'session',
      nativeMinChars: 12000,
      nativeMaxChars: 8000,
      minArtifactChars: 4000,
      maxArtifactChars: 2_000_000,
      vaultMaxBytes: 536_870_912,
      vaultHighWaterPct: 90,
      vaultLowWaterPct: 80,
      busyTimeoutMs: 10_000,
      sessionTtlSeconds: 21_600,
      searchDeadlineMs: 2000,
      inlineLeases: 1,
      maxPageChars: 20000,
      maxSearchResults: 50,
      workingGraphChars: 0,
      tokenBudget: true,
      tokenizerJson: '',
      tiktokenEncoding: '',
      contextCompaction: true,
      contextMinVaultChars: 600,
      contextCollapseAfterTurns: 0,
      contextInlineRecentTurns: 1,
      contextBlockTurns: 0,
      skillRouting: false,
      rewriteHorizonRequests: 0,
      digestDiagnosticChars: 400,
      reasoningReduction: false,
      pricingProfile: 'auto',
      cacheReadMultiplier: undefined,
      cacheWriteMultiplier: undefined,
      minCachePrefixTokens: undefined,
      previewMarker: false,
      contextLimitTokens: 0,
      outputReserveTokens: 4096,
      tokenSafetyMargin: 512,
      ledger: true,
      experiment: 'default',
      exclude: [],
      pytestGuard: true,
      eqInputUsdPerM: 0,
      eqOutputUsdPerM: 0,
      eqCacheReadUsdPerM: 0,
      eqCacheWriteUsdPerM: 0,
      eqRateCard: '',
      toolNames: {},
    });
    expect(c.incontext).toEqual({
      backend: 'tiktoken',
      tokenizerUrl: '',
      tokenizerTimeoutSeconds: 30,
      tokenizerUserAgent: expect.stringMatching(/^token-terminator\/\d+\.\d+\.\d+/),
      fallbackMarginTokens: 1024,
      minOutputTokens: 4096,
      compressionWindowTokens: undefined,
    });
  });

  it('puts default files under ~/.local/share/token-terminator', () => {
    const c = load();
    const dir = join(HOME, '.local', 'share', 'token-terminator');
    expect(c.dataDir).toBe(dir);
    expect(c.dbPath).toBe(join(dir, 'artifacts.sqlite3'));
    expect(c.ledgerPath).toBe(join(dir, 'experiments.sqlite3'));
  });

  it('prefers TOKEN_TERMINATOR_HOME, then an absolute XDG_DATA_HOME', () => {
    expect(load({ XDG_DATA_HOME: '/xdg' }).dbPath).toBe('/xdg/token-terminator/artifacts.sqlite3');
    expect(load({ XDG_DATA_HOME: 'relative/dir' }).dataDir).toBe(join(HOME, '.local', 'share', 'token-terminator'));
    const c = load({ XDG_DATA_HOME: '/xdg', TOKEN_TERMINATOR_HOME: '/srv/tt' });
    expect(c.dataDir).toBe('/srv/tt');
    expect(c.ledgerPath).toBe('/srv/tt/experiments.sqlite3');
  });

  it('expands ~ and resolves relative paths, keeps :memory:', () => {
    expect(load({ TOKEN_TERMINATOR_DB_PATH: '~/v.sqlite3' }).dbPath).toBe(join(HOME, 'v.sqlite3'));
    expect(load({ TOKEN_TERMINATOR_DB_PATH: 'rel/v.sqlite3' }).dbPath).toBe(resolve('rel/v.sqlite3'));
    expect(load({ TOKEN_TERMINATOR_DB_PATH: ':memory:' }).dbPath).toBe(':memory:');
  });

  it('chooses the vllm incontext backend when a tokenizer URL is set', () => {
    const c = load({ INCONTEXT_TOKENIZER_URL: 'http://127.0.0.1:8000/tokenize' });
    expect(c.incontext.backend).toBe('vllm');
    expect(c.incontext.tokenizerUrl).toBe('http://127.0.0.1:8000/tokenize');
  });
});

describe('loadConfig env parsing', () => {
  it.each(['1', 'true', 'YES', ' On ', 'TRUE'])('reads %j as true', (raw) => {
    expect(load({ TOKEN_TERMINATOR_PREVIEW_MARKER: raw }).previewMarker).toBe(true);
  });

  it.each(['0', 'false', 'No', 'OFF '])('reads %j as false', (raw) => {
    expect(load({ TOKEN_TERMINATOR_ENABLED: raw }).enabled).toBe(false);
  });

  it('lower-cases and trims CSV lists and drops empties', () => {
    const c = load({ TOKEN_TERMINATOR_BACKENDS: ' Local, SSH,,', TOKEN_TERMINATOR_EXCLUDE: 'Git Push, docker exec' });
    expect(c.backends).toEqual(['local', 'ssh']);
    expect(c.exclude).toEqual(['git push', 'docker exec']);
  });

  it('collapses any list containing all to [all]', () => {
    expect(load({ TOKEN_TERMINATOR_BACKENDS: 'local,ALL,ssh' }).backends).toEqual(['all']);
  });

  it('falls back to the default for an empty list or an empty value', () => {
    expect(load({ TOKEN_TERMINATOR_BACKENDS: ' , ,' }).backends).toEqual(['local']);
    expect(load({ TOKEN_TERMINATOR_TIMEOUT_MS: '   ' }).timeoutMs).toBe(500);
    expect(load({ TOKEN_TERMINATOR_EXPERIMENT: '  ' }).experiment).toBe('default');
  });

  it('parses numbers, enums and the tool-name map', () => {
    const c = load({
      TOKEN_TERMINATOR_MODE: ' Aggressive ',
      TOKEN_TERMINATOR_TIMEOUT_MS: '750',
      TOKEN_TERMINATOR_EQ_INPUT_USD_PER_M: '2.5',
      TOKEN_TERMINATOR_EQ_RATE_CARD: 'list price',
      TOKEN_TERMINATOR_EXPERIMENT: ' trial-a ',
      TOKEN_TERMINATOR_TEMPORAL_SCOPE: 'WORKSPACE',
      TOKEN_TERMINATOR_TIKTOKEN_ENCODING: 'cl100k_base',
      TOKEN_TERMINATOR_TOOL_NAMES: '{"grep": "search_files", "bash": "terminal"}',
      INCONTEXT_COMPRESSION_WINDOW_TOKENS: '100000',
      INCONTEXT_TOKENIZER_TIMEOUT_SECONDS: '2.5',
    });
    expect(c.mode).toBe('aggressive');
    expect(c.timeoutMs).toBe(750);
    expect(c.eqInputUsdPerM).toBe(2.5);
    expect(c.eqRateCard).toBe('list price');
    expect(c.experiment).toBe('trial-a');
    expect(c.temporalScope).toBe('workspace');
    expect(c.tiktokenEncoding).toBe('cl100k_base');
    expect(c.toolNames).toEqual({ grep: 'search_files', bash: 'terminal' });
    expect(c.incontext.compressionWindowTokens).toBe(100000);
    expect(c.incontext.tokenizerTimeoutSeconds).toBe(2.5);
  });

  test.prop([fc.integer({ min: -1000, max: 100_000 })], { numRuns: 100 })(
    'accepts TIMEOUT_MS exactly when it is an integer ≥ 50',
    (n) => {
      if (n >= 50) {
        expect(load({ TOKEN_TERMINATOR_TIMEOUT_MS: String(n) }).timeoutMs).toBe(n);
      } else {
        expect(errorOf(() => load({ TOKEN_TERMINATOR_TIMEOUT_MS: String(n) })).message).toBe(
          `TOKEN_TERMINATOR_TIMEOUT_MS must be an integer ≥ 50, got "${n}"`,
        );
      }
    },
  );

  it('reads the block, inline-view, pricing and observation settings', () => {
    expect(load({}).maxInlineChars).toBe(32_000);
    expect(load({}).observationPattern).toBe(DEFAULT_OBSERVATION_PATTERN);
    const c = load({
      TOKEN_TERMINATOR_CONTEXT_BLOCK_TURNS: '12',
      TOKEN_TERMINATOR_MAX_INLINE_CHARS: '0',
      TOKEN_TERMINATOR_PRICING_PROFILE: 'anthropic',
      TOKEN_TERMINATOR_CACHE_READ_MULTIPLIER: '0.25',
      TOKEN_TERMINATOR_CACHE_WRITE_MULTIPLIER: '2',
      TOKEN_TERMINATOR_MIN_CACHE_PREFIX_TOKENS: '4096',
      TOKEN_TERMINATOR_OBSERVATION_PATTERN: 'none',
      TOKEN_TERMINATOR_REASONING_REDUCTION: 'on',
    });
    expect([
      c.contextBlockTurns,
      c.maxInlineChars,
      c.pricingProfile,
      c.cacheReadMultiplier,
      c.cacheWriteMultiplier,
      c.minCachePrefixTokens,
      c.observationPattern,
      c.reasoningReduction,
    ]).toEqual([12, 0, 'anthropic', 0.25, 2, 4096, 'none', true]);
  });

  it('accepts TOKEN_TERMINATOR_BUSY_TIMEOUT_MS within 0…60000 (env and override) and rejects the rest', () => {
    expect(load({ TOKEN_TERMINATOR_BUSY_TIMEOUT_MS: '0' }).busyTimeoutMs).toBe(0);
    expect(load({ TOKEN_TERMINATOR_BUSY_TIMEOUT_MS: '60000' }).busyTimeoutMs).toBe(60_000);
    expect(loadConfig({ env: {}, overrides: { busyTimeoutMs: 250 } }).busyTimeoutMs).toBe(250);
    for (const bad of ['-1', '60001', '1.5', 'soon']) {
      expect(errorOf(() => load({ TOKEN_TERMINATOR_BUSY_TIMEOUT_MS: bad })).message).toBe(
        `TOKEN_TERMINATOR_BUSY_TIMEOUT_MS must be an integer in 0…60000, got "${bad}"`,
      );
    }
  });
});

/** One invalid value per variable: every one of them must fail loudly and name the variable. */
const INVALID: Record<string, string> = {
  TOKEN_TERMINATOR_ENABLED: 'maybe',
  TOKEN_TERMINATOR_MODE: 'turbo',
  TOKEN_TERMINATOR_DB_URL: 'mysql://db/x',
  TOKEN_TERMINATOR_DB_POOL_SIZE: '0',
  TOKEN_TERMINATOR_DB_STATEMENT_TIMEOUT_MS: '-5',
  TOKEN_TERMINATOR_TIMEOUT_MS: 'abc',
  TOKEN_TERMINATOR_BACKENDS: 'local,\u0007',
  TOKEN_TERMINATOR_RTK_PATH: '/usr/bin/\u0001rtk',
  TOKEN_TERMINATOR_CACHE_TTL: '0',
  TOKEN_TERMINATOR_CACHE_SIZE: '1.5',
  TOKEN_TERMINATOR_TEMPORAL_DELTA: '2',
  TOKEN_TERMINATOR_TEMPORAL_MIN_CHARS: '0',
  TOKEN_TERMINATOR_TEMPORAL_SCOPE: 'global',
  TOKEN_TERMINATOR_NATIVE_MIN_CHARS: '999',
  TOKEN_TERMINATOR_NATIVE_MAX_CHARS: '12k',
  TOKEN_TERMINATOR_DB_PATH: 'a\u0000b',
  TOKEN_TERMINATOR_MIN_ARTIFACT_CHARS: '-1',
  TOKEN_TERMINATOR_MAX_ARTIFACT_CHARS: '50000001',
  TOKEN_TERMINATOR_VAULT_MAX_BYTES: '0',
  TOKEN_TERMINATOR_VAULT_HIGH_WATER_PCT: '101',
  TOKEN_TERMINATOR_VAULT_LOW_WATER_PCT: '100',
  TOKEN_TERMINATOR_BUSY_TIMEOUT_MS: '60001',
  TOKEN_TERMINATOR_SESSION_TTL_SECONDS: '59',
  TOKEN_TERMINATOR_SEARCH_DEADLINE_MS: '9',
  TOKEN_TERMINATOR_CONTEXT_BLOCK_TURNS: '1001',
  TOKEN_TERMINATOR_REWRITE_HORIZON_REQUESTS: '-1',
  TOKEN_TERMINATOR_HISTORY_POLICY: 'eager',
  TOKEN_TERMINATOR_WORKING_SET_IDLE_TURNS: '0',
  TOKEN_TERMINATOR_DIGEST_DIAGNOSTIC_CHARS: '20001',
  TOKEN_TERMINATOR_REASONING_REDUCTION: 'sometimes',
  TOKEN_TERMINATOR_OBSERVATION_PATTERN: '(unclosed',
  TOKEN_TERMINATOR_PRICING_PROFILE: 'gemini',
  TOKEN_TERMINATOR_SKILL_ROUTING: 'maybe',
  TOKEN_TERMINATOR_CACHE_READ_MULTIPLIER: '1.5',
  TOKEN_TERMINATOR_CACHE_WRITE_MULTIPLIER: '0.5',
  TOKEN_TERMINATOR_MIN_CACHE_PREFIX_TOKENS: 'many',
  TOKEN_TERMINATOR_MAX_INLINE_CHARS: 'many',
  TOKEN_TERMINATOR_INLINE_LEASES: '101',
  TOKEN_TERMINATOR_MAX_PAGE_CHARS: '0',
  TOKEN_TERMINATOR_MAX_SEARCH_RESULTS: '501',
  TOKEN_TERMINATOR_WORKING_GRAPH_CHARS: '-5',
  TOKEN_TERMINATOR_TOKEN_BUDGET: 'y',
  TOKEN_TERMINATOR_OUTPUT_CAP: 'sometimes',
  TOKEN_TERMINATOR_WINDOW_FIT: 'sometimes',
  TOKEN_TERMINATOR_WINDOW_LOW_WATER_PCT: '5',
  TOKEN_TERMINATOR_WINDOW_FIT_ORDER: 'a\u0007b',
  TOKEN_TERMINATOR_MODEL_LIMITS: '{"gpt-4o": {"maxOutputTokens": 0}}',
  TOKEN_TERMINATOR_TOKENIZER_JSON: '\u007f',
  TOKEN_TERMINATOR_TIKTOKEN_ENCODING: 'p99k_base',
  TOKEN_TERMINATOR_CONTEXT_COMPACTION: 'enabled',
  TOKEN_TERMINATOR_CONTEXT_MIN_VAULT_CHARS: '99',
  TOKEN_TERMINATOR_CONTEXT_COLLAPSE_AFTER_TURNS: '-1',
  TOKEN_TERMINATOR_CONTEXT_INLINE_RECENT_TURNS: 'five',
  TOKEN_TERMINATOR_PREVIEW_MARKER: 'sometimes',
  TOKEN_TERMINATOR_CONTEXT_LIMIT_TOKENS: '-1',
  TOKEN_TERMINATOR_OUTPUT_RESERVE_TOKENS: '4k',
  TOKEN_TERMINATOR_TOKEN_SAFETY_MARGIN: '1e3',
  TOKEN_TERMINATOR_LEDGER: 'nope',
  TOKEN_TERMINATOR_LEDGER_PATH: '\u0002',
  TOKEN_TERMINATOR_EXPERIMENT: 'x'.repeat(81),
  TOKEN_TERMINATOR_EXCLUDE: 'git\u0000',
  TOKEN_TERMINATOR_PYTEST_GUARD: 'always',
  TOKEN_TERMINATOR_EQ_INPUT_USD_PER_M: '-0.5',
  TOKEN_TERMINATOR_EQ_OUTPUT_USD_PER_M: 'free',
  TOKEN_TERMINATOR_EQ_CACHE_READ_USD_PER_M: 'NaN',
  TOKEN_TERMINATOR_EQ_CACHE_WRITE_USD_PER_M: 'Infinity',
  TOKEN_TERMINATOR_EQ_RATE_CARD: 'y'.repeat(121),
  TOKEN_TERMINATOR_TOOL_NAMES: '{"bash": "shell"}',
  TOKEN_TERMINATOR_HOME: '\u0004',
  INCONTEXT_TOKENIZER_URL: 'ftp://example/tokenize',
  INCONTEXT_BACKEND: 'Bad Name!',
  INCONTEXT_TOKENIZER_TIMEOUT_SECONDS: '0',
  INCONTEXT_TOKENIZER_USER_AGENT: 'agent\u0000',
  INCONTEXT_FALLBACK_MARGIN_TOKENS: '-1',
  INCONTEXT_MIN_OUTPUT_TOKENS: '0',
  INCONTEXT_COMPRESSION_WINDOW_TOKENS: '0',
};

describe('loadConfig invalid values', () => {
  it('has an invalid example for every variable it reads', () => {
    const current = CONFIG_VARIABLES.filter((n) => n.startsWith('TOKEN_TERMINATOR_') || n.startsWith('INCONTEXT_'));
    expect(Object.keys(INVALID).sort()).toEqual([...current].sort());
  });

  it.each(Object.entries(INVALID))('rejects %s with a message naming it and the accepted range', (name, value) => {
    const error = errorOf(() => load({ [name]: value }));
    expect(error.code).toBe('E_CONFIG');
    expect(error.message.startsWith(`${name} must be `)).toBe(true);
    expect(error.message).toContain(', got ');
  });

  it('names the option and the variable for a bad override', () => {
    const error = errorOf(() => loadConfig({ env: base, overrides: { maxSearchResults: 0 } }));
    expect(error.message).toBe(
      'option maxSearchResults (TOKEN_TERMINATOR_MAX_SEARCH_RESULTS) must be an integer in 1…500, got 0',
    );
    expect(() => loadConfig({ env: base, overrides: { mode: 'fast' as never } })).toThrow(
      /option mode .* must be one of balanced/,
    );
    expect(() => loadConfig({ env: base, overrides: { incontext: { minOutputTokens: -1 } } })).toThrow(
      /option incontext\.minOutputTokens \(INCONTEXT_MIN_OUTPUT_TOKENS\)/,
    );
  });

  it('rejects unknown override keys', () => {
    expect(() => loadConfig({ env: base, overrides: { timeout: 5 } as never })).toThrow(
      /unknown configuration option "timeout"/,
    );
    expect(() => loadConfig({ env: base, overrides: { incontext: { url: 'x' } } as never })).toThrow(
      /"incontext\.url"/,
    );
  });

  it('has no stateDb: the host accounting database is not read by this package (removed, not accepted)', () => {
    expect(() => loadConfig({ env: base, overrides: { stateDb: '/tmp/state.db' } as never })).toThrow(
      /unknown configuration option "stateDb"/,
    );
    expect(CONFIG_VARIABLES).not.toContain('TOKEN_TERMINATOR_STATE_DB');
    expect(CONFIG_VARIABLES).not.toContain('RTK_HERMES_PLUS_STATE_DB');
    expect(Object.keys(loadConfig({ env: { ...base, TOKEN_TERMINATOR_STATE_DB: '/tmp/state.db' } }))).not.toContain(
      'stateDb',
    );
  });

  it('checks min artifact ≤ max artifact', () => {
    expect(() => load({ TOKEN_TERMINATOR_MIN_ARTIFACT_CHARS: '3000000' })).toThrow(
      'TOKEN_TERMINATOR_MIN_ARTIFACT_CHARS (3000000) must be ≤ TOKEN_TERMINATOR_MAX_ARTIFACT_CHARS (2000000)',
    );
    expect(load({ TOKEN_TERMINATOR_MIN_ARTIFACT_CHARS: '2000000' }).minArtifactChars).toBe(2_000_000);
  });

  it('checks collapse-after (non-zero) ≥ inline-recent', () => {
    expect(() =>
      load({ TOKEN_TERMINATOR_CONTEXT_COLLAPSE_AFTER_TURNS: '2', TOKEN_TERMINATOR_CONTEXT_INLINE_RECENT_TURNS: '5' }),
    ).toThrow(/COLLAPSE_AFTER_TURNS \(2\) must be 0 \(off\) or ≥/);
    expect(load({ TOKEN_TERMINATOR_CONTEXT_COLLAPSE_AFTER_TURNS: '0' }).contextCollapseAfterTurns).toBe(0);
    expect(load({ TOKEN_TERMINATOR_CONTEXT_COLLAPSE_AFTER_TURNS: '5' }).contextCollapseAfterTurns).toBe(5);
  });

  it('checks low water < high water', () => {
    expect(() => load({ TOKEN_TERMINATOR_VAULT_LOW_WATER_PCT: '90' })).toThrow(
      /LOW_WATER_PCT \(90\) must be < .*HIGH_WATER_PCT \(90\)/,
    );
    expect(
      load({ TOKEN_TERMINATOR_VAULT_HIGH_WATER_PCT: '95', TOKEN_TERMINATOR_VAULT_LOW_WATER_PCT: '94' })
        .vaultLowWaterPct,
    ).toBe(94);
  });

  it('requires a tokenizer URL for the vllm incontext backend', () => {
    expect(() => load({ INCONTEXT_BACKEND: 'vllm' })).toThrow(/requires INCONTEXT_TOKENIZER_URL/);
  });
  it('names TOKEN_TERMINATOR_TOKENIZER_JSON when its file does not exist (env and override)', () => {
    expect(() => load({ TOKEN_TERMINATOR_TOKENIZER_JSON: '/nonexistent/tokenizer.json' })).toThrow(ConfigError);
    expect(() => load({ TOKEN_TERMINATOR_TOKENIZER_JSON: '/nonexistent/tokenizer.json' })).toThrow(
      'TOKEN_TERMINATOR_TOKENIZER_JSON names no file: "/nonexistent/tokenizer.json"',
    );
    expect(() => loadConfig({ env: {}, overrides: { tokenizerJson: '/nonexistent/t.json' } })).toThrow(
      /option tokenizerJson \(TOKEN_TERMINATOR_TOKENIZER_JSON\) names no file/,
    );
  });
});

describe('loadConfig precedence and legacy aliases', () => {
  it('lets typed overrides beat env', () => {
    const c = loadConfig({
      env: {
        ...base,
        TOKEN_TERMINATOR_MODE: 'native',
        TOKEN_TERMINATOR_TIMEOUT_MS: '900',
        INCONTEXT_MIN_OUTPUT_TOKENS: '100',
      },
      overrides: { mode: 'terminal', backends: ['Local', 'SSH'], incontext: { minOutputTokens: 2048 } },
    });
    expect(c.mode).toBe('terminal');
    expect(c.timeoutMs).toBe(900);
    expect(c.backends).toEqual(['local', 'ssh']);
    expect(c.incontext.minOutputTokens).toBe(2048);
  });

  it('treats an undefined override as unset', () => {
    expect(loadConfig({ env: { ...base, TOKEN_TERMINATOR_MODE: 'native' }, overrides: { mode: undefined } }).mode).toBe(
      'native',
    );
  });

  it('reads RTK_HERMES_PLUS_* only when the new name is unset', () => {
    expect(load({ RTK_HERMES_PLUS_MODE: 'native' }).mode).toBe('native');
    expect(load({ RTK_HERMES_PLUS_MODE: 'native', TOKEN_TERMINATOR_MODE: 'off' }).mode).toBe('off');
    expect(load({ RTK_HERMES_PLUS_MODE: 'native', TOKEN_TERMINATOR_MODE: ' ' }).mode).toBe('native');
    expect(load({ RTK_HERMES_PLUS_EXCLUDE: 'Git Push' }).exclude).toEqual(['git push']);
    expect(load({ RTK_HERMES_PLUS_LEDGER_PATH: '/tmp/l.sqlite3' }).ledgerPath).toBe('/tmp/l.sqlite3');
  });

  it('has no legacy alias for variables newer than the rename', () => {
    expect(load({ RTK_HERMES_PLUS_TEMPORAL_DELTA: 'false' }).temporalDelta).toBe(true);
  });

  it('names the legacy variable when its value is invalid', () => {
    expect(() => load({ RTK_HERMES_PLUS_TIMEOUT_MS: 'soon' })).toThrow(
      /^RTK_HERMES_PLUS_TIMEOUT_MS must be an integer ≥ 50/,
    );
  });

  it('reads the former HERMES_* names for incontext, INCONTEXT_* first', () => {
    const legacy = load({
      HERMES_VLLM_TOKENIZER_URL: 'http://localhost:9/tokenize',
      HERMES_VLLM_TOKENIZER_TIMEOUT_SECONDS: '5',
      HERMES_VLLM_TOKENIZER_USER_AGENT: 'me/1',
      HERMES_DYNAMIC_BUDGET_FALLBACK_MARGIN_TOKENS: '64',
    });
    expect(legacy.incontext).toMatchObject({
      backend: 'vllm',
      tokenizerUrl: 'http://localhost:9/tokenize',
      tokenizerTimeoutSeconds: 5,
      tokenizerUserAgent: 'me/1',
      fallbackMarginTokens: 64,
    });
    const both = load({ HERMES_DYNAMIC_BUDGET_FALLBACK_MARGIN_TOKENS: '64', INCONTEXT_FALLBACK_MARGIN_TOKENS: '128' });
    expect(both.incontext.fallbackMarginTokens).toBe(128);
  });
});

describe('loadConfig result', () => {
  it('is deep-frozen', () => {
    const c = loadConfig({ env: { ...base, TOKEN_TERMINATOR_TOOL_NAMES: '{"grep":"search_files"}' } });
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.incontext)).toBe(true);
    expect(Object.isFrozen(c.backends)).toBe(true);
    expect(Object.isFrozen(c.toolNames)).toBe(true);
    expect(() => {
      (c as { mode: string }).mode = 'off';
    }).toThrow(TypeError);
    expect(() => {
      (c.backends as string[]).push('ssh');
    }).toThrow(TypeError);
  });

  it('does not freeze or keep the caller override objects', () => {
    const backends = ['local'];
    const c = loadConfig({ env: base, overrides: { backends } });
    expect(Object.isFrozen(backends)).toBe(false);
    backends.push('ssh');
    expect(c.backends).toEqual(['local']);
  });
});

describe('modeFlags', () => {
  const table = {
    balanced: {
      terminal: true,
      native: true,
      nativeReadFile: false,
      compiler: true,
      temporal: true,
      suggest: false,
      recoveryTool: true,
    },
    aggressive: {
      terminal: true,
      native: true,
      nativeReadFile: true,
      compiler: true,
      temporal: true,
      suggest: false,
      recoveryTool: true,
    },
    native: {
      terminal: false,
      native: true,
      nativeReadFile: false,
      compiler: false,
      temporal: false,
      suggest: false,
      recoveryTool: true,
    },
    terminal: {
      terminal: true,
      native: false,
      nativeReadFile: false,
      compiler: false,
      temporal: false,
      suggest: false,
      recoveryTool: false,
    },
    suggest: {
      terminal: false,
      native: false,
      nativeReadFile: false,
      compiler: false,
      temporal: false,
      suggest: true,
      recoveryTool: false,
    },
    off: {
      terminal: false,
      native: false,
      nativeReadFile: false,
      compiler: false,
      temporal: false,
      suggest: false,
      recoveryTool: false,
    },
  } as const;

  it.each(MODES)('follows the modes table for %s', (mode) => {
    expect(modeFlags(loadConfig({ env: base, overrides: { mode } }))).toEqual(table[mode]);
  });

  it('turns everything off when disabled, and temporal off with TEMPORAL_DELTA=0', () => {
    expect(Object.values(modeFlags(load({ TOKEN_TERMINATOR_ENABLED: 'off' }))).some(Boolean)).toBe(false);
    expect(modeFlags(load({ TOKEN_TERMINATOR_TEMPORAL_DELTA: '0' })).temporal).toBe(false);
    expect(modeFlags(load({ TOKEN_TERMINATOR_TEMPORAL_DELTA: '0' })).compiler).toBe(true);
  });
});
