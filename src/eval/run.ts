/**
 * `runEval(options)`: the paired non-inferiority harness. For each pair, one synthetic task is
 * sent to the same model twice, in two fresh sessions: through a Terminator in `off` mode and one
 * in `balanced` mode (the library's own pipeline: the tool result reduced, every request compiled,
 * recovery calls answered by the recovery tool), in an order drawn from the recorded seed.
 *
 * Both arms see the same system prompt, question, tool list (the task's `terminal` tool and the
 * `token_terminator` recovery tool) and the same transcript up to the tool output; only what the
 * pipeline does to it differs. Any change of the serving model or its system fingerprint aborts
 * the run. The protocol (seed, arm order, margin, rule) is fixed and reported before the first
 * request; the verdict comes from `analyse` only, and savings are computed after it.
 */
import { createHash, randomInt } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PACKAGE_VERSION } from '../config/version.js';
import { ConfigError, TokenTerminatorError } from '../errors.js';
import { canonicalJson } from '../measure/index.js';
import { parseArgs } from '../model/index.js';
import { definedFields } from '../options.js';
import { prng } from '../prng.js';
import { referencedArtifacts } from '../receipts/index.js';
import { createTerminator, type Terminator } from '../runtime/index.js';
import { chatCompletion, DriftGuard, redact, type ChatMessage, type Identity } from './client.js';
import { grade, SYSTEM_PROMPT } from './grade.js';
import {
  analyse,
  ALPHA,
  ALPHA_HARM,
  CHECKPOINT_PAIRS,
  decisionRule,
  DEFAULT_MARGIN,
  FINAL_PAIRS,
  type Analysis,
  type Verdict,
} from './protocol.js';
import { makeTasks, type EvalTask, type TaskFamily } from './tasks.js';

export type Arm = 'off' | 'balanced';

export interface EvalOptions {
  /** OpenAI-compatible base URL (`<base>/chat/completions` is called), e.g. http://127.0.0.1:8000/v1. */
  readonly baseUrl: string;
  /**
   * Send the balanced arm unreduced to this `token-terminator proxy` (balanced mode, same provider) to test
   * the gateway; both arms then offer only the task's tool (the proxy answers recovery itself).
   * Default: none (the library reduces the balanced arm in-process).
   */
  readonly balancedBaseUrl?: string;
  /** Model name sent in every request. */
  readonly model: string;
  /** Pairs to run: the 36-pair checkpoint or the precommitted 72-pair final. Default: 72. */
  readonly pairs?: number;
  /** Seed of tasks and arm order. Default: a random 31-bit integer (recorded in the results). */
  readonly seed?: number;
  /** Non-inferiority margin on accuracy, in (0, 0.5). Default: 0.1. */
  readonly margin?: number;
  /** Bearer token for the endpoint. Default: none. */
  readonly apiKey?: string;
  /** `temperature` sent in every request; null sends none. Default: 0. */
  readonly temperature?: number | null;
  /** Model calls per arm before it counts as unanswered. Default: 8. */
  readonly maxRounds?: number;
  /** Per-request timeout in ms. Default: 120000. */
  readonly timeoutMs?: number;
  /** Environment for both Terminators' config (mode and vault path are set here). Default: process.env. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Continue a checkpoint's or aborted run's results: same seed, margin and serving identity; pairs kept. */
  readonly resume?: EvalResults;
  /** Called once, before the first request, with the precommitted protocol. */
  readonly onProtocol?: (protocol: EvalProtocol) => void;
  /** Called after each pair. */
  readonly onPair?: (pair: PairResult, done: number, planned: number) => void;
}

export interface EvalProtocol {
  readonly seed: number;
  readonly planned_pairs: number;
  readonly checkpoint_pairs: number;
  readonly final_pairs: number;
  readonly margin: number;
  readonly alpha: number;
  readonly alpha_harm: number;
  readonly rule: string;
  readonly model: string;
  readonly base_url: string;
  /** How the balanced arm is reduced: in-process (`library`) or by a gateway (`proxy at <url>`). */
  readonly balanced_via: string;
  readonly temperature: number | null;
  /** sha256 of the tasks (questions, evidence, answers): the same seed gives the same hash. */
  readonly tasks_sha256: string;
  /** The same over the first 36 tasks only: a checkpoint and its final share it. */
  readonly checkpoint_tasks_sha256: string;
  /** Arm order of every planned pair, drawn from the seed before the first request. */
  readonly arm_order: readonly (readonly [Arm, Arm])[];
}

export type ArmOutcome = 'correct' | 'wrong' | 'no answer' | 'rounds exhausted';

export interface ArmResult {
  readonly correct: boolean;
  readonly outcome: ArmOutcome;
  readonly requests: number;
  /** Prompt tokens over the arm's requests (the provider's usage, else o200k of the request's messages). */
  readonly prompt_tokens: number;
  readonly completion_tokens: number;
  readonly usage_source: 'provider' | 'o200k';
  readonly recovery_calls: number;
  /** o200k tokens of what the recovery tool returned to the model. */
  readonly recovery_tokens: number;
  /** Receipts (artifact ids) in the tool output the model first saw. */
  readonly receipts_shown: number;
}

export interface PairResult {
  readonly index: number;
  readonly family: TaskFamily;
  readonly order: readonly [Arm, Arm];
  readonly off: ArmResult;
  readonly balanced: ArmResult;
}

/** An arm's sums over the pairs (the fields of {@link TOTALS}). */
export type ArmTotals = Pick<ArmResult, (typeof TOTALS)[number]>;

export interface EvalResults {
  readonly harness: 'token-terminator eval';
  readonly version: string;
  readonly protocol: EvalProtocol;
  readonly identity: Identity | null;
  readonly status: 'complete' | 'stopped for harm' | 'aborted';
  readonly abort_reason?: string;
  readonly verdict: Verdict;
  readonly checkpoint?: Analysis;
  readonly final?: Analysis;
  readonly pairs: readonly PairResult[];
  /** Reported after the verdict; cannot change it. */
  readonly savings: { readonly off: ArmTotals; readonly balanced: ArmTotals; readonly prompt_tokens_saved_pct: number };
}

/** The run stopped early (drift, provider error); `results` holds every pair completed before. */
export class EvalAbortedError extends TokenTerminatorError {
  constructor(
    cause: TokenTerminatorError,
    readonly results: EvalResults,
  ) {
    super(cause.code, cause.message, { cause });
  }
}

/** Validate options and fix the protocol (tasks, arm order), without any request. */
export function planEval(options: EvalOptions): { protocol: EvalProtocol; tasks: EvalTask[] } {
  const pairs = options.pairs ?? FINAL_PAIRS;
  if (pairs !== CHECKPOINT_PAIRS && pairs !== FINAL_PAIRS)
    throw new ConfigError(
      `eval: pairs must be ${CHECKPOINT_PAIRS} (checkpoint) or ${FINAL_PAIRS} (final) (got ${pairs})`,
    );
  const margin = options.margin ?? options.resume?.protocol.margin ?? DEFAULT_MARGIN;
  if (!(margin > 0 && margin < 0.5)) throw new ConfigError(`eval: margin must be within (0, 0.5) (got ${margin})`);
  const resumed = options.resume?.protocol;
  if (resumed !== undefined) {
    if (options.seed !== undefined && options.seed !== resumed.seed)
      throw new ConfigError(`eval: --seed ${options.seed} differs from the resumed run's seed ${resumed.seed}`);
    if (options.margin !== undefined && options.margin !== resumed.margin)
      throw new ConfigError(
        `eval: margin ${options.margin} differs from the resumed run's precommitted margin ${resumed.margin}`,
      );
    if (options.model !== resumed.model)
      throw new ConfigError(`eval: model "${options.model}" differs from the resumed run's "${resumed.model}"`);
    if (options.resume!.verdict === 'inferior')
      throw new ConfigError('eval: the resumed run already found harm; its verdict "inferior" is final');
    if (options.resume!.pairs.length > pairs)
      throw new ConfigError(
        `eval: the resumed run already has ${options.resume!.pairs.length} pairs (more than ${pairs})`,
      );
  }
  const seed = options.seed ?? resumed?.seed ?? randomInt(2 ** 31);
  if (!Number.isSafeInteger(seed) || seed < 0 || seed > 0xffffffff)
    throw new ConfigError(`eval: seed must be an integer within [0, 4294967295] (got ${seed})`);
  if (options.maxRounds !== undefined && !(Number.isInteger(options.maxRounds) && options.maxRounds >= 1))
    throw new ConfigError(`eval: maxRounds must be an integer ≥ 1 (got ${options.maxRounds})`);
  if (options.model.trim() === '') throw new ConfigError('eval: model must not be empty');
  if (options.balancedBaseUrl !== undefined && !/^https?:\/\//.test(options.balancedBaseUrl))
    throw new ConfigError(
      `eval: balanced base URL must start with http:// or https:// (got ${redact(options.balancedBaseUrl)})`,
    );
  if (!/^https?:\/\//.test(options.baseUrl))
    throw new ConfigError(`eval: base URL must start with http:// or https:// (got ${redact(options.baseUrl)})`);
  const tasks = makeTasks(seed, pairs);
  const order = armOrder(seed, pairs);
  const hash = createHash('sha256');
  const checkpointHash = createHash('sha256');
  for (const t of tasks) {
    const bytes = canonicalJson([t.question, t.command, t.evidence, t.expected], { compact: true });
    hash.update(bytes);
    if (t.index < CHECKPOINT_PAIRS) checkpointHash.update(bytes);
  }
  return {
    tasks,
    protocol: {
      seed,
      planned_pairs: pairs,
      checkpoint_pairs: CHECKPOINT_PAIRS,
      final_pairs: FINAL_PAIRS,
      margin,
      alpha: ALPHA,
      alpha_harm: ALPHA_HARM,
      rule: decisionRule(margin),
      model: options.model,
      base_url: redact(options.baseUrl),
      balanced_via: options.balancedBaseUrl === undefined ? 'library' : `proxy at ${redact(options.balancedBaseUrl)}`,
      temperature: options.temperature === undefined ? 0 : options.temperature,
      tasks_sha256: hash.digest('hex'),
      checkpoint_tasks_sha256: checkpointHash.digest('hex'),
      arm_order: order,
    },
  };
}

/** Arm order per pair from the seed: a fair coin per pair, on its own stream (tasks use others). */
export function armOrder(seed: number, pairs: number): [Arm, Arm][] {
  const r = prng((seed ^ 0xa5a5a5a5) >>> 0);
  return Array.from({ length: pairs }, () => (r() < 0.5 ? ['off', 'balanced'] : ['balanced', 'off']));
}

/** Run the harness. Throws ConfigError for bad options, EvalAbortedError on drift or a provider error. */
export async function runEval(options: EvalOptions): Promise<EvalResults> {
  const { protocol, tasks } = planEval(options);
  const resume = options.resume;
  if (resume !== undefined && resume.protocol.checkpoint_tasks_sha256 !== protocol.checkpoint_tasks_sha256)
    throw new ConfigError(
      'eval: the resumed run was made with other tasks (another version of the harness); start a new run',
    );
  if (resume !== undefined && resume.protocol.balanced_via !== protocol.balanced_via)
    throw new ConfigError(
      `eval: the resumed run reduced the balanced arm via ${resume.protocol.balanced_via}, this one via ${protocol.balanced_via}`,
    );
  options.onProtocol?.(protocol);
  const dir = mkdtempSync(join(tmpdir(), 'token-terminator-eval-'));
  const env = options.env ?? process.env;
  const terminators: Partial<Record<Arm, Terminator>> = {};
  const pairs: PairResult[] = [...(resume?.pairs ?? [])];
  const guard = new DriftGuard(resume?.identity ?? undefined);
  const runTag = `${protocol.seed}-${Date.now().toString(36)}`;
  const results = (status: EvalResults['status'], extra: { abort_reason?: string } = {}): EvalResults =>
    finish(protocol, guard.identity ?? null, pairs, status, extra);
  const harm = (): boolean => analyse(outcomes(pairs), protocol.margin, false).verdict === 'inferior';
  try {
    terminators.off = await openArm(dir, env, 'off');
    // Through a proxy the gateway reduces the balanced arm: the harness itself passes both through.
    const balancedMode = options.balancedBaseUrl === undefined ? 'balanced' : 'off';
    terminators.balanced = await openArm(dir, env, 'balanced', balancedMode);
    for (const task of tasks.slice(pairs.length)) {
      const order = protocol.arm_order[task.index]!;
      const arms: Partial<Record<Arm, ArmResult>> = {};
      for (const arm of order) arms[arm] = await runArm(task, arm, terminators[arm]!, guard, options, protocol, runTag);
      const pair: PairResult = {
        index: task.index,
        family: task.family,
        order,
        off: arms.off!,
        balanced: arms.balanced!,
      };
      pairs.push(pair);
      options.onPair?.(pair, pairs.length, protocol.planned_pairs);
      if (pairs.length === CHECKPOINT_PAIRS && protocol.planned_pairs > CHECKPOINT_PAIRS && harm())
        return results('stopped for harm');
    }
    return results('complete');
  } catch (error) {
    if (error instanceof TokenTerminatorError && !(error instanceof ConfigError))
      throw new EvalAbortedError(error, results('aborted', { abort_reason: error.message }));
    throw error;
  } finally {
    await terminators.off?.close();
    await terminators.balanced?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The Terminator of one arm (in `mode`, its vault in `dir`): no metrics, vault errors thrown. */
export function openArm(dir: string, env: EvalOptions['env'], arm: Arm, mode: Arm = arm): Promise<Terminator> {
  return createTerminator({
    env: env ?? process.env,
    overrides: { mode, dbPath: join(dir, `${arm}.sqlite3`) },
    metrics: false,
    vaultErrors: 'throw',
  });
}

function outcomes(pairs: readonly PairResult[]): [boolean, boolean][] {
  return pairs.map((p) => [p.off.correct, p.balanced.correct]);
}

/** The sums of {@link ArmTotals}, in its order. */
const TOTALS = ['prompt_tokens', 'completion_tokens', 'requests', 'recovery_calls', 'recovery_tokens'] as const;

function finish(
  protocol: EvalProtocol,
  identity: Identity | null,
  pairs: readonly PairResult[],
  status: EvalResults['status'],
  extra: { abort_reason?: string },
): EvalResults {
  const atCheckpoint =
    pairs.length >= CHECKPOINT_PAIRS
      ? analyse(outcomes(pairs.slice(0, CHECKPOINT_PAIRS)), protocol.margin, false)
      : undefined;
  const atFinal =
    pairs.length >= FINAL_PAIRS ? analyse(outcomes(pairs.slice(0, FINAL_PAIRS)), protocol.margin, true) : undefined;
  const verdict: Verdict =
    status === 'aborted'
      ? 'withheld'
      : atCheckpoint?.verdict === 'inferior'
        ? 'inferior'
        : (atFinal?.verdict ?? atCheckpoint?.verdict ?? 'withheld');
  const totals = (arm: Arm): ArmTotals =>
    Object.fromEntries(TOTALS.map((k) => [k, pairs.reduce((n, p) => n + p[arm][k], 0)])) as ArmTotals;
  const off = totals('off');
  const balanced = totals('balanced');
  return {
    harness: 'token-terminator eval',
    version: PACKAGE_VERSION,
    protocol,
    identity,
    status,
    ...extra,
    verdict,
    ...definedFields({ checkpoint: atCheckpoint, final: atFinal }),
    pairs,
    savings: {
      off,
      balanced,
      prompt_tokens_saved_pct:
        off.prompt_tokens === 0
          ? 0
          : Math.round(((off.prompt_tokens - balanced.prompt_tokens) / off.prompt_tokens) * 1e4) / 1e2,
    },
  };
}

const TERMINAL_TOOL = {
  type: 'function',
  function: {
    name: 'terminal',
    description: 'Run a shell command and return its output.',
    parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
  },
};

/** The first request's messages of a task (before any reduction), shared by both arms. */
export function openingMessages(task: EvalTask): ChatMessage[] {
  return [
    { role: 'system', content: SYSTEM_PROMPT },
    { role: 'user', content: task.question },
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        {
          id: 'call_1',
          type: 'function',
          function: { name: 'terminal', arguments: JSON.stringify({ command: task.command }) },
        },
      ],
    },
  ];
}

/** The tool list both arms send. */
export function evalTools(tt: Terminator): Record<string, unknown>[] {
  const r = tt.recoveryTool;
  return [
    TERMINAL_TOOL,
    { type: 'function', function: { name: r.name, description: r.description, parameters: r.parameters } },
  ];
}

async function runArm(
  task: EvalTask,
  arm: Arm,
  tt: Terminator,
  guard: DriftGuard,
  options: EvalOptions,
  protocol: EvalProtocol,
  runTag: string,
): Promise<ArmResult> {
  const sessionId = `eval:${runTag}:${task.index}:${arm}`;
  const maxRounds = options.maxRounds ?? 8;
  const viaProxy = options.balancedBaseUrl !== undefined;
  const tools = viaProxy ? [TERMINAL_TOOL] : evalTools(tt);
  const baseUrl = arm === 'balanced' && viaProxy ? options.balancedBaseUrl! : options.baseUrl;
  const transcript: ChatMessage[] = openingMessages(task);
  const toolOutput = async (callId: string): Promise<string> => {
    const step = await tt.reduceToolResult(
      { callId, name: 'terminal', args: { command: task.command }, content: task.evidence },
      { sessionId },
    );
    return typeof step.value.content === 'string' ? step.value.content : task.evidence;
  };
  const first = await toolOutput('call_1');
  transcript.push({ role: 'tool', tool_call_id: 'call_1', content: first });
  const temperature = protocol.temperature === null ? {} : { temperature: protocol.temperature };
  const route = { model: options.model, provider: 'openai', endpoint: '/v1/chat/completions' };
  const client = { baseUrl, ...definedFields({ apiKey: options.apiKey, timeoutMs: options.timeoutMs }) };
  let prompt = 0;
  let completion = 0;
  let providerUsage = true;
  let recoveryCalls = 0;
  let recoveryTokens = 0;
  for (let round = 1; round <= maxRounds; round++) {
    const body = { model: options.model, messages: transcript, tools, ...temperature };
    const sent = (await tt.reduceRequest(body, { sessionId, requestId: `${sessionId}#${round}`, route })).value;
    const reply = await chatCompletion(sent, client);
    guard.check(reply.identity, `pair ${task.index + 1} (${arm} arm, request ${round})`);
    if (reply.promptTokens === undefined) providerUsage = false;
    prompt += reply.promptTokens ?? tt.counter.count(canonicalJson(sent['messages'] ?? [], { compact: true }));
    completion += reply.completionTokens ?? tt.counter.count(reply.message.content ?? '');
    const message: ChatMessage = {
      role: 'assistant',
      content: reply.message.content ?? null,
      ...(reply.message.tool_calls?.length ? { tool_calls: reply.message.tool_calls } : {}),
    };
    transcript.push(message);
    const calls = message.tool_calls ?? [];
    const result = (outcome: ArmOutcome): ArmResult => ({
      correct: outcome === 'correct',
      outcome,
      requests: round,
      prompt_tokens: prompt,
      completion_tokens: completion,
      usage_source: providerUsage ? 'provider' : 'o200k',
      recovery_calls: recoveryCalls,
      recovery_tokens: recoveryTokens,
      receipts_shown: referencedArtifacts(first).length,
    });
    if (calls.length === 0) {
      const text = message.content ?? '';
      return result(grade(task, text) ? 'correct' : /ANSWER\s*:/i.test(text) ? 'wrong' : 'no answer');
    }
    for (const call of calls) {
      const content = await answerCall(call, tt, sessionId, toolOutput);
      if (call.function.name === tt.recoveryTool.name) {
        recoveryCalls++;
        recoveryTokens += tt.counter.count(content);
      }
      transcript.push({ role: 'tool', tool_call_id: call.id, content });
    }
    if (round === maxRounds) return result('rounds exhausted');
  }
  throw new Error('unreachable');
}

/** The answer to one tool call: recovery from the vault, the terminal from the task's evidence. */
async function answerCall(
  call: { readonly id: string; readonly function: { readonly name: string; readonly arguments: string } },
  tt: Terminator,
  sessionId: string,
  toolOutput: (callId: string) => Promise<string>,
): Promise<string> {
  if (call.function.name === tt.recoveryTool.name)
    return tt.recoveryTool.handle(parseArgs(call.function.arguments), { sessionId });
  if (call.function.name === 'terminal') return toolOutput(call.id);
  return JSON.stringify({ error: `unknown tool ${call.function.name}` });
}
