/**
 * `rewriteTerminalCommand`: terminal tool calls rewritten through `rtk rewrite`.
 * RTK filters the command's output when it runs; this operator only swaps the command string.
 * Exit 1 and 2 are rtk's documented "no rewrite" answers (skipped); a hang, crash, garbage, an
 * undocumented exit code or an unusable binary is a fault: the command passes through unchanged
 * with a `failed_open` decision (`RtkFaultError:E_RTK_*`).
 */
import { defaultInt } from '../src/config/index.js';
import { STAGES } from '../src/stages.js';
import type { ModeFlags } from '../src/config/index.js';
import type { Mode } from '../src/config/types.js';
import { RtkFaultError } from '../src/errors.js';
import { intOption, stringsOption } from '../src/options.js';
import { stageOperator, type SessionReducer, type StageOperator } from '../src/operator-kit.js';
import { advance, errorLabel, note, type Step, type ToolCall } from '../src/step.js';
import { backendAllowed, backendOf, commandOf, cwdOf } from '../src/tools/command.js';
import { resolveFlags } from '../src/tools/modes.js';
import { canonicalToolName, validateToolNames } from '../src/tools/names.js';
import {
  createPytestQuietProbe,
  isPytestCommand,
  readTextFileSync,
  type ReadTextFile,
} from '../src/tools/pytest-guard.js';
import { defaultSpawner, resolveRtkPath, runRtkRewrite, type Spawner } from '../src/tools/spawner.js';
import { TtlLru } from '../src/tools/ttl-cache.js';

const STAGE = STAGES.rewriteTerminalCommand;
const MARKER = ': RTK && ';

/** Options of {@link rewriteTerminalCommand}; every field is optional. */
export interface RewriteTerminalCommandOptions {
  /** Mode gate; ignored when `flags` is given. In `suggest` the rewrite is measured only. @defaultValue `'balanced'` */
  readonly mode?: Mode;
  /** Mode flags from the config (`modeFlags(config)`); they win over `mode`. @defaultValue the flags of `mode` */
  readonly flags?: ModeFlags;
  /** Pinned rtk binary; beats PATH lookup (TOKEN_TERMINATOR_RTK_PATH). @defaultValue `rtk` looked up on PATH */
  readonly rtkPath?: string;
  /** Environment for PATH lookup and TERMINAL_ENV/TERMINAL_BACKEND. @defaultValue `process.env` */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Deadline for one `rtk rewrite` call, ms (≥ 50). @defaultValue `500` (config `timeoutMs`) */
  readonly timeoutMs?: number;
  /** Cache time-to-live, ms (≥ 1). @defaultValue `600_000` (config `cacheTtlSeconds` × 1000) */
  readonly cacheTtlMs?: number;
  /** Cache entries (≥ 1). @defaultValue `512` (config `cacheSize`) */
  readonly cacheSize?: number;
  /** Command prefixes never rewritten (case-insensitive, after left-trim). @defaultValue `[]` */
  readonly exclude?: readonly string[];
  /** Terminal backends allowed (`all` allows every one). @defaultValue `['local']` */
  readonly backends?: readonly string[];
  /** Skip pytest commands whose project config is already quiet. @defaultValue `true` */
  readonly pytestGuard?: boolean;
  /** Prefix rewritten commands with `: RTK && `. @defaultValue `false` */
  readonly previewMarker?: boolean;
  /** Host tool name → canonical name. @defaultValue terminal, bash, shell, run_terminal_cmd … → terminal */
  readonly toolNames?: Readonly<Record<string, string>>;
  /** Process spawner. @defaultValue `spawn` from node:child_process */
  readonly spawn?: Spawner;
  /** Monotonic clock in ms for the cache. @defaultValue `performance.now` */
  readonly clock?: () => number;
  /** File reader for the pytest config probe. @defaultValue `fs.readFileSync` (undefined on error) */
  readonly readFile?: ReadTextFile;
  /** Observer of spawned pids (tests check that they are reaped). @defaultValue none */
  readonly onSpawn?: (pid: number) => void;
}

/** `command`, or `cmd` (Codex CLI's exec_command) when only that one is there. */
function commandField(args: Readonly<Record<string, unknown>>): 'command' | 'cmd' {
  return args['command'] === undefined && args['cmd'] !== undefined ? 'cmd' : 'command';
}

/**
 * Swap the command string of each allowed terminal tool call for the one `rtk rewrite` returns;
 * a call rtk declines, or any rtk fault, passes through unchanged.
 *
 * @example
 * calls$.pipe(rewriteTerminalCommand({ timeoutMs: 500 })) // `git status` → `rtk git status`
 */
export function rewriteTerminalCommand(options: RewriteTerminalCommandOptions = {}): StageOperator<ToolCall> {
  const flags = resolveFlags('rewriteTerminalCommand', options);
  const toolNames = validateToolNames('rewriteTerminalCommand', options.toolNames);
  const timeoutMs = intOption(STAGE, 'timeoutMs', options.timeoutMs, defaultInt('timeoutMs'), 50);
  const ttl = intOption(STAGE, 'cacheTtlMs', options.cacheTtlMs, defaultInt('cacheTtlSeconds') * 1000, 1);
  const size = intOption(STAGE, 'cacheSize', options.cacheSize, defaultInt('cacheSize'), 1);
  const exclude = stringsOption(STAGE, 'exclude', options.exclude, [])
    .map((p) => p.trim().toLowerCase())
    .filter((p) => p !== '');
  const backends = stringsOption(STAGE, 'backends', options.backends, ['local']).map((b) => b.trim().toLowerCase());
  const env = options.env ?? process.env;
  const spawn = options.spawn ?? defaultSpawner;
  const clock = options.clock ?? (() => performance.now());
  const active = flags.terminal || flags.suggest;
  return stageOperator<ToolCall>({
    name: STAGE,
    open: () => {
      const rtkPath = active ? resolveRtkPath(options.rtkPath, env) : undefined;
      const quiet = createPytestQuietProbe(options.readFile ?? readTextFileSync);
      const skip = (step: Step<ToolCall>, reason: string): Step<ToolCall> =>
        note(step, { stage: STAGE, kind: 'skipped', reason });
      const apply = (step: Step<ToolCall>, rewritten: string | null): Step<ToolCall> => {
        if (rewritten === null) return skip(step, 'no_rewrite');
        if (!flags.terminal) return note(step, { stage: STAGE, kind: 'measured', reason: 'suggested' });
        const next = options.previewMarker === true ? MARKER + rewritten : rewritten;
        const call = step.value;
        return advance(
          step,
          { ...call, args: { ...call.args, [commandField(call.args)]: next } },
          { stage: STAGE, kind: 'applied', reason: 'rewritten' },
        );
      };
      const spawnRewrite = async (
        step: Step<ToolCall>,
        command: string,
        cwd: string,
        key: string,
        signal: AbortSignal,
        cache: TtlLru<string | null>,
      ): Promise<Step<ToolCall> | undefined> => {
        const base = { rtkPath: rtkPath!, command, cwd, timeoutMs, signal, spawn };
        const outcome = await runRtkRewrite(
          options.onSpawn === undefined ? base : { ...base, onSpawn: options.onSpawn },
        );
        if (outcome.kind === 'cancelled') return undefined;
        if (outcome.kind === 'timeout' || outcome.kind === 'error') {
          const reason = outcome.kind === 'timeout' ? 'timeout' : outcome.reason;
          return note(step, {
            stage: STAGE,
            kind: 'failed_open',
            reason,
            error: errorLabel(new RtkFaultError(reason)),
          });
        }
        const rewritten = outcome.kind === 'rewrite' ? outcome.command : null;
        cache.set(key, rewritten); // negative results are cached too; timeouts and errors are not
        return apply(step, rewritten);
      };
      // Synchronous for every path that needs no child process (marble-testable, no microtask hop).
      const reduce: SessionReducer<ToolCall> = (step, session, signal) => {
        const call = step.value;
        if (!active || canonicalToolName(call.name, toolNames) !== 'terminal') return undefined;
        // Only a command string is rewritten, in the field it came in (an argv array is run as it is).
        const command = commandOf(call.args);
        if (command === undefined || typeof call.args[commandField(call.args)] !== 'string') return undefined;
        const lead = command.trimStart();
        if (lead.startsWith('rtk ') || lead.startsWith(MARKER)) return skip(step, 'already_rtk');
        if (exclude.some((p) => lead.toLowerCase().startsWith(p))) return skip(step, 'excluded');
        if (!backendAllowed(backendOf(call.args, env), backends)) return skip(step, 'backend');
        if (rtkPath === undefined) return skip(step, 'rtk_unavailable');
        const cwd = cwdOf(call.args, step.context.cwd ?? process.cwd());
        if (options.pytestGuard !== false && isPytestCommand(command) && quiet(cwd))
          return skip(step, 'pytest_quiet_config');
        const key = `${cwd}\u0000${command}`;
        // Per session: a rewrite learnt in one conversation is not another's.
        const cache = (session.rewrites ??= new TtlLru<string | null>(size, ttl, clock));
        const cached = cache.get(key);
        return cached === undefined ? spawnRewrite(step, command, cwd, key, signal, cache) : apply(step, cached);
      };
      return { reduce };
    },
  });
}
