/**
 * The `token_terminator` recovery tool: exact pages, lossy views and search over the vault.
 *
 * Results are JSON strings with sorted keys and snake_case names. The tool never throws:
 * bad arguments, unknown artifacts and vault failures all come back as `{"error": {code, message}}`
 * so a model can correct itself. The session id is taken only from the host argument.
 */
import type { Config } from '../config/types.js';
import { modeFlags } from '../config/index.js';
import { PACKAGE_VERSION } from '../config/version.js';
import { ConfigError, TokenTerminatorError } from '../errors.js';
import { canonicalJson } from '../measure/index.js';
import { definedFields } from '../options.js';
import type { RecoveryHost, RecoveryTool } from '../runtime/types.js';
import { errorLabel, sessionStateKey } from '../step.js';
import { rtkAvailable } from '../tools/spawner.js';
import type { ArtifactStore, StoreScope, VaultHealth } from '../vault/ports.js';
import type { ArtifactSummary } from '../vault/types.js';
import {
  DEFAULT_PAGE_CHARS,
  RECOVERY_DESCRIPTION,
  RECOVERY_TOOL_NAME,
  recoveryArgsSchema,
  recoveryJsonSchema,
  type RecoveryAction,
  type RecoveryArgs,
} from './schema.js';
import type { WorkingStateStore } from '../vault/ports.js';

export * from './schema.js';
export type { WorkingStateStore } from '../vault/ports.js';
export { WorkingStateError } from '../vault/working-state.js';
export { isRecoveryResult } from '../receipts/recovery-results.js';

/**
 * Error codes of error results (beside the codes of src/errors.ts passed through from the vault).
 *
 * @example
 * import { RECOVERY_ERRORS, recoveryError } from 'token-terminator';
 * if (recoveryError(result)?.code === RECOVERY_ERRORS.invalidArguments) console.warn('the model sent bad arguments');
 */
export const RECOVERY_ERRORS = Object.freeze({
  invalidArguments: 'E_INVALID_ARGUMENTS',
  workingStateDisabled: 'E_WORKING_STATE_DISABLED',
  workingStateUnavailable: 'E_WORKING_STATE_UNAVAILABLE',
  failed: 'E_RECOVERY_FAILED',
});

/** `lossy` views point here for the authoritative content. */
export const EXACT_RECOVERY = 'token_terminator action=artifact_get';

/** Options of the recovery tool; `vault` and `config` are required. */
export interface RecoveryToolOptions {
  /** The vault to read (required). */
  readonly vault: ArtifactStore;
  /** Page ceiling, search ceiling, mode and working-state budget come from here (required). */
  readonly config: Config;
  /** Extra fields merged into the `status` result, e.g. process metrics; they must be content-free. @defaultValue none */
  readonly status?: () => Promise<object>;
  /** Store behind working_state_apply / working_state_get. @defaultValue none → a clear error result */
  readonly workingState?: WorkingStateStore;
  /** Called once per call with the action and whether it succeeded; content-free. @defaultValue none */
  readonly onCall?: (action: RecoveryAction | 'invalid', ok: boolean) => void;
  /** The vault's health for `status`. @defaultValue not reported */
  readonly health?: () => VaultHealth;
  /**
   * What a call may read: `'session'` (default) only the artifacts the host's session of the
   * host's tenant observed or was delivered — what the model was shown; `'store'` the whole vault
   * (the CLI, run by whoever owns the vault file; never for a model). @defaultValue `'session'`
   */
  readonly scope?: 'session' | 'store';
}

/** A result object before serialization; `error` is present exactly when the call failed. */
export type RecoveryResult = Readonly<Record<string, unknown>>;

/** The error a recovery call answers with: a stable code, a message and the argument at fault when there is one. */
export interface RecoveryErrorBody {
  readonly code: string;
  readonly message: string;
  readonly field?: string;
}

/** The tool plus `call`, which returns the result object instead of its JSON (for the CLI and tests). */
export interface RecoveryToolHandle extends RecoveryTool {
  call(args: unknown, host: RecoveryHost): Promise<RecoveryResult>;
}

/**
 * True when a result is an error result; narrows to its error body.
 *
 * @example
 * import { recoveryError } from 'token-terminator';
 * const result = await tool.call({ action: 'artifact_get', artifact_id: 'a_missing' }, { sessionId: 's1' });
 * const error = recoveryError(result); // { code: 'E_ARTIFACT_NOT_FOUND', message: … }
 */
export function recoveryError(result: RecoveryResult): RecoveryErrorBody | undefined {
  const error = result['error'];
  return error !== null && typeof error === 'object' ? (error as RecoveryErrorBody) : undefined;
}

class ArgumentProblem extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

const clamp = (n: number, lo: number, hi: number): number => Math.min(hi, Math.max(lo, n));

function failure(code: string, message: string, field?: string): RecoveryResult {
  return { error: field === undefined ? { code, message } : { code, message, field } };
}

const snake = (key: string): string => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** Vault-defined keys in snake_case, one level only: user data such as JSON key names is never rewritten. */
function snakeTop(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [snake(k), v]));
}

/** The named fields of a vault result, their keys in snake_case. */
function fields<T extends object>(value: T, keys: readonly (keyof T & string)[]): RecoveryResult {
  return Object.fromEntries(keys.map((k) => [snake(k), value[k]]));
}

const summaryJson = (s: ArtifactSummary): RecoveryResult =>
  fields(s, ['artifactId', 'sha256', 'chars', 'bytes', 'toolName', 'createdAt', 'observationCount']);

function parseArgs(args: unknown): RecoveryArgs {
  let input = args;
  if (typeof input === 'string') {
    // Some frameworks hand over the raw arguments string.
    try {
      input = JSON.parse(input) as unknown;
    } catch {
      input = undefined;
    }
  }
  if (input === null || typeof input !== 'object' || Array.isArray(input))
    throw new ArgumentProblem('arguments', 'arguments must be a JSON object');
  const parsed = recoveryArgsSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = typeof issue?.path[0] === 'string' ? issue.path[0] : 'arguments';
    throw new ArgumentProblem(field, issue?.message ?? 'invalid arguments');
  }
  return parsed.data;
}

function need<T>(value: T | undefined, field: string, action: string): T {
  if (value === undefined) throw new ArgumentProblem(field, `${field} is required for action ${action}`);
  return value;
}

function needQuery(args: RecoveryArgs): string {
  const query = need(args.query, 'query', args.action);
  if (query.trim() === '') throw new ArgumentProblem('query', `query must not be empty for action ${args.action}`);
  return query;
}

async function recoveryStatus(options: RecoveryToolOptions): Promise<RecoveryResult> {
  const { vault, config } = options;
  const flags = modeFlags(config);
  let vaultInfo: RecoveryResult = {};
  let vaultError: string | null = null;
  try {
    vaultInfo = fields(await vault.usage(), [
      'artifacts',
      'bytes',
      'capacityBytes',
      'highWaterBytes',
      'lowWaterBytes',
      'prunedArtifacts',
      'prunedBytes',
    ]);
  } catch (error) {
    vaultError = errorLabel(error);
  }
  let health: VaultHealth | undefined;
  try {
    health = options.health?.();
  } catch {
    // not reported
  }
  const core: RecoveryResult = {
    ...(health === undefined ? {} : { vault_health: definedFields({ state: health.state, detail: health.detail }) }),
    plugin: 'token-terminator',
    version: PACKAGE_VERSION,
    enabled: config.enabled,
    mode: config.mode,
    vault_available: vaultError === null,
    vault_error: vaultError,
    vault: vaultInfo,
    limits: {
      max_page_chars: config.maxPageChars,
      max_search_results: config.maxSearchResults,
      max_artifact_chars: config.maxArtifactChars,
      vault_max_bytes: config.vaultMaxBytes,
    },
    profile: {
      // The mode allows it, and an rtk binary is really there to run (status must not promise rewrites).
      terminal_rewrite: flags.terminal && rtkAvailable(config.rtkPath, process.env),
      native_compression: flags.native,
      native_read_file: flags.nativeReadFile,
      request_compiler: flags.compiler,
      temporal_delta: flags.temporal,
      token_budget: config.tokenBudget,
      output_cap: config.outputCap,
      context_compaction: config.contextCompaction,
      working_state: config.workingGraphChars > 0,
    },
  };
  if (options.status === undefined) return core;
  try {
    return { ...core, ...(await options.status()) };
  } catch (error) {
    return { ...core, status_error: errorLabel(error) };
  }
}

async function workingState(
  { config, workingState: store }: RecoveryToolOptions,
  args: RecoveryArgs,
  /** The session's {@link sessionStateKey}: its working state is its tenant's alone. */
  stateKey: string,
): Promise<RecoveryResult> {
  if (config.workingGraphChars <= 0) {
    return failure(
      RECOVERY_ERRORS.workingStateDisabled,
      'working state is disabled (TOKEN_TERMINATOR_WORKING_GRAPH_CHARS=0); set it above 0 to enable it',
    );
  }
  if (store === undefined) {
    return failure(RECOVERY_ERRORS.workingStateUnavailable, 'no working-state store is configured for this host');
  }
  if (args.action === 'working_state_apply') {
    return { ...(await store.apply(stateKey, need(args.operations, 'operations', args.action))) };
  }
  return {
    ...(await store.get(stateKey, {
      includeRetired: args.include_retired ?? false,
      limit: clamp(args.limit ?? 500, 0, 500),
    })),
  };
}

async function run(
  options: RecoveryToolOptions,
  args: RecoveryArgs,
  stateKey: string,
  scope: StoreScope | undefined,
): Promise<RecoveryResult> {
  const { vault, config } = options;
  switch (args.action) {
    case 'status':
      return recoveryStatus(options);
    case 'artifact_get': {
      const id = need(args.artifact_id, 'artifact_id', args.action);
      const limit = clamp(args.limit ?? DEFAULT_PAGE_CHARS, 1, config.maxPageChars);
      const page = await vault.page(id, args.offset ?? 0, limit, scope);
      return fields(page, ['artifactId', 'content', 'offset', 'nextOffset', 'totalChars', 'sha256', 'toolName']);
    }
    case 'artifact_peek': {
      const id = need(args.artifact_id, 'artifact_id', args.action);
      const limit = clamp(args.limit ?? DEFAULT_PAGE_CHARS, 200, Math.max(200, config.maxPageChars));
      const p = await vault.peek(id, limit, scope);
      return {
        ...fields(p, [
          'artifactId',
          'sha256',
          'toolName',
          'totalChars',
          'totalBytes',
          'lineCount',
          'observationCount',
          'createdAt',
        ]),
        structure: snakeTop(p.structure),
        synopsis: { head: p.synopsis.head, tail: p.synopsis.tail, signals: p.synopsis.signals },
        lossy: true,
        exact_recovery: EXACT_RECOVERY,
      };
    }
    case 'artifact_find': {
      const id = need(args.artifact_id, 'artifact_id', args.action);
      const f = await vault.find(id, needQuery(args), clamp(args.limit ?? 100, 1, 100), scope);
      return {
        ...fields(f, ['artifactId', 'query', 'totalMatches', 'truncated']),
        matches: f.matches.map((m) => ({ line: m.line, text: m.text })),
        lossy: true,
        exact_recovery: EXACT_RECOVERY,
      };
    }
    case 'artifact_search': {
      const found = await vault.search(
        needQuery(args),
        clamp(args.limit ?? config.maxSearchResults, 1, config.maxSearchResults),
        scope,
      );
      // Cut short by the search deadline: say so, so the model can narrow the query.
      return { results: found.map(summaryJson), ...(found.partial === true ? { partial: true } : {}) };
    }
    case 'working_state_apply':
    case 'working_state_get':
      return workingState(options, args, stateKey);
  }
}

/**
 * Build the recovery tool over a vault.
 *
 * @example
 * const tool = createRecoveryTool({ vault, config });
 * const page = JSON.parse(await tool.handle({ action: 'artifact_get', artifact_id: id }, { sessionId }));
 */
export function createRecoveryTool(options: RecoveryToolOptions): RecoveryToolHandle {
  const scopeMode = options.scope ?? 'session';
  if (scopeMode !== 'session' && scopeMode !== 'store')
    throw new ConfigError(`createRecoveryTool: scope must be 'session' or 'store'`);
  const parameters = Object.freeze(recoveryJsonSchema());

  async function call(rawArgs: unknown, host: RecoveryHost): Promise<RecoveryResult> {
    let action: RecoveryAction | 'invalid' = 'invalid';
    let result: RecoveryResult;
    try {
      const args = parseArgs(rawArgs);
      action = args.action;
      const sessionId = String(host?.sessionId ?? '');
      const tenant = typeof host?.tenant === 'string' ? host.tenant : '';
      // The model only ever reads what its own session was shown: ids and searches outside it are unknown.
      const stateKey = sessionStateKey({ sessionId, tenant });
      result = await run(options, args, stateKey, scopeMode === 'store' ? undefined : { tenant, sessionId });
    } catch (error) {
      if (error instanceof ArgumentProblem) {
        result = failure(RECOVERY_ERRORS.invalidArguments, error.message, error.field);
      } else if (error instanceof TokenTerminatorError) {
        const code = error.code === 'E_VAULT_ARGUMENT' ? RECOVERY_ERRORS.invalidArguments : error.code;
        const hint = error.code === 'E_ARTIFACT_NOT_FOUND' ? '; use artifact_search to locate artifacts' : '';
        result = failure(code, error.message + hint);
      } else {
        // Unknown failures carry a class label only: their messages may quote content.
        result = failure(RECOVERY_ERRORS.failed, `recovery failed (${errorLabel(error)})`);
      }
    }
    options.onCall?.(action, recoveryError(result) === undefined);
    return result;
  }

  return Object.freeze({
    name: RECOVERY_TOOL_NAME,
    description: RECOVERY_DESCRIPTION,
    parameters,
    call,
    handle: async (args: unknown, host: RecoveryHost) => canonicalJson(await call(args, host), { compact: true }),
  });
}
