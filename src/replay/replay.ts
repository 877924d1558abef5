/**
 * `replay`: run recorded sessions through the whole pipeline as a host would, and measure.
 *
 * Per session, in order: a `tool` message goes through the tool-result stream under its canonical
 * tool name (corpus `bash` → `terminal`, plus TOKEN_TERMINATOR_TOOL_NAMES) and the transcript keeps
 * the reduced result. Each `assistant` message was answering a request: raw = every earlier original
 * message, final = the request stream's output on every earlier reduced message (plus `model` and
 * `tools` when recorded). Recorded tool calls skip the tool-call stream: their commands already ran.
 *
 * Timing covers the pipeline only; sizes, tokens, receipts, metrics rows and the ledger are
 * computed outside the timed sections.
 */
import { closeSync, fchmodSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { applyOverrides, pricingFor, type ConfigOverrides, type PricingProfile } from '../config/index.js';
import { fencedBlocks } from '../compile/actions.js';
import { observationTest } from '../compile/observations.js';
import type { Mode } from '../config/types.js';
import { createTiktokenCounter } from '../measure/index.js';
import { parseArgs } from '../model/index.js';
import type { TokenCounter } from '../measure/types.js';
import { createTerminator, type Terminator } from '../runtime/index.js';
import type { Decision, ProviderRequest, Step, StepContext } from '../step.js';
import { budgetCounterFrom, type BudgetCounter } from '../budget/counter.js';
import { STAGES } from '../stages.js';
import { attributeRequest, createSkillCuts } from '../telemetry/attribution.js';
import { openLedger, type Ledger } from '../telemetry/ledger.js';
import { createMessagesMeter, type MessagesMeter } from '../ledger/messages-meter.js';
import { round } from '../telemetry/ledger.js';
import { anyFailedOpen, requestMetric, savedByStage } from '../telemetry/metrics.js';
import { commonPrefixChars, FigureAccumulator, itemPrefix, type ReplayFigures, type RequestSample } from './figures.js';
import { FidelityTracker, type FidelityCounts } from './fidelity.js';
import { SightTracker } from './sight.js';
import type { RequestPoint } from './series.js';
import type { RecordedSession } from './sessions.js';
import { ReceiptVerifier } from '../receipts/verify.js';
import { REPLAY_TOOL_NAMES } from '../tools/names.js';

/** Options of a replay; every field is optional. */
export interface ReplayOptions {
  /** Mode to replay under. @defaultValue the config's (balanced) */
  readonly mode?: Mode;
  /** Cache-read price relative to uncached, for the route's profile only. @defaultValue the profile's (0.1) */
  readonly cacheReadPrice?: number;
  /** Pricing profile of `effective_cost_*` for every session. @defaultValue each session's route profile (by model) */
  readonly pricing?: PricingProfile;
  /** Vault file to use (kept). @defaultValue a fresh vault in a temp dir, removed afterwards */
  readonly db?: string;
  /** Experiment ledger file. @defaultValue `experiments.sqlite3` beside the vault; `false` disables it */
  readonly ledger?: string | false;
  /** Write a JSON line `{session, index, final}` per request here (created or truncated, 0600). @defaultValue none */
  readonly dump?: string;
  /** Environment for the config. @defaultValue `process.env` */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Config overrides (mode, db path and ledger path are set by replay). @defaultValue none */
  readonly overrides?: ConfigOverrides;
  /** Counter for the figures. @defaultValue tiktoken o200k_base */
  readonly counter?: TokenCounter;
  /** Add each session's per-request series (`per_request`) to the figures. @defaultValue false */
  readonly series?: boolean;
  /** Called after every request with (done, total). @defaultValue none */
  readonly onProgress?: (done: number, total: number) => void;
  /** Clock in ms (tests). @defaultValue `performance.now` */
  readonly now?: () => number;
  /**
   * The window W (INCONTEXT_COMPRESSION_WINDOW_TOKENS) the fit acts at and the window figures count against.
   * @defaultValue none (the route's window; no window figures)
   */
  readonly window?: number;
  /** The output reserve R with `window` (INCONTEXT_MIN_OUTPUT_TOKENS). @defaultValue the config's (4096) */
  readonly reserve?: number;
  /** Replay through this caller-owned Terminator (`db`, `mode`, `env`, `overrides` ignored). @defaultValue a new one */
  readonly terminator?: Terminator;
}

/**
 * Replay sessions and return the figures of ./figures.ts.
 *
 * @example
 * const figures = await replaySessions(await readSessions('sessions.jsonl'), { mode: 'balanced' });
 */
export async function replaySessions(
  sessions: readonly RecordedSession[],
  options: ReplayOptions = {},
): Promise<ReplayFigures> {
  const price = options.cacheReadPrice;
  if (price !== undefined && !(price >= 0 && price <= 1))
    throw new RangeError('replay: cacheReadPrice must be within [0, 1]');
  const now = options.now ?? (() => performance.now());
  const tempDir =
    options.db === undefined && options.terminator === undefined
      ? mkdtempSync(join(tmpdir(), 'token-terminator-replay-'))
      : undefined;
  const dbPath = options.terminator?.vault.path ?? options.db ?? join(tempDir!, 'artifacts.sqlite3');
  const counter = options.counter ?? createTiktokenCounter('o200k_base');
  const meter = createMessagesMeter(counter);
  const { tt, dump, ledger } = await openReplay(options, dbPath);
  const all = new FigureAccumulator();
  const perSession: ReplayFigures['sessions'] = [];
  const total = sessions.reduce((n, s) => n + requestCount(s), 0);
  let done = 0;
  const runId = `${Date.now().toString(36)}-${tt.config.mode}`;
  const window: WindowCheck | undefined =
    options.window === undefined
      ? undefined
      : {
          window: options.window,
          reserve: options.reserve ?? tt.config.incontext.minOutputTokens,
          counter: budgetCounterFrom(counter),
        };
  const deps = { tt, meter, ledger, dump, now, runId, window };
  try {
    for (const session of sessions) {
      const base =
        options.pricing ??
        pricingFor(tt.config, session.model === undefined ? undefined : { model: session.model }, 'chat');
      const profile = price === undefined ? base : applyOverrides(base, { cacheRead: price });
      // The session's figures, added to the run's totals as each request is answered.
      const acc = new FigureAccumulator();
      const points: RequestPoint[] = [];
      const fidelity = await new SessionReplay(session, {
        ...deps,
        onRequest: (sample) => {
          acc.add(sample, profile);
          all.add(sample, profile);
          if (options.series === true)
            points.push({
              raw_tokens: sample.rawTokens,
              final_tokens: sample.finalTokens,
              raw_chars: sample.rawChars,
              final_chars: sample.finalChars,
              receipts: sample.receipts,
              saved_by_stage: sample.saved,
            });
          options.onProgress?.(++done, total);
        },
        onExtraTime: (ms) => {
          acc.addTime(ms);
          all.addTime(ms);
        },
      }).run();
      acc.addFidelity(fidelity);
      all.addFidelity(fidelity);
      perSession.push({
        id: session.id,
        ...acc.figures(),
        ...(options.series === true ? { per_request: points } : {}),
      });
    }
  } finally {
    dump?.close();
    await ledger?.close();
    if (options.terminator === undefined) await tt.close();
    if (options.counter === undefined) counter.dispose?.();
    if (tempDir !== undefined) rmSync(tempDir, { recursive: true, force: true });
  }
  return { ...all.figures(), peak_rss_mb: round(process.resourceUsage().maxRSS / 1024, 1), sessions: perSession };
}

/** A run's Terminator (given, or one on `dbPath` whose vault errors throw: never a silent pass-through), dump and ledger. */
async function openReplay(
  options: ReplayOptions,
  dbPath: string,
): Promise<{ tt: Terminator; dump: DumpWriter | undefined; ledger: Ledger | undefined }> {
  const ledgerPath =
    options.ledger === false
      ? undefined
      : (options.ledger ?? (dbPath === ':memory:' ? ':memory:' : join(dirname(dbPath), 'experiments.sqlite3')));
  const incontext = {
    ...options.overrides?.incontext,
    ...(options.window === undefined ? {} : { compressionWindowTokens: options.window }),
    ...(options.reserve === undefined ? {} : { minOutputTokens: options.reserve }),
  };
  const overrides: ConfigOverrides = {
    ...options.overrides,
    dbPath,
    ...(options.mode === undefined ? {} : { mode: options.mode }),
    ...(Object.keys(incontext).length === 0 ? {} : { incontext }),
  };
  const tt =
    options.terminator ??
    (await createTerminator({
      ...(options.env === undefined ? {} : { env: options.env }),
      overrides,
      metrics: false,
      ledger: false,
      vaultErrors: 'throw',
    }));
  try {
    const dump = options.dump === undefined ? undefined : openPrivateStream(options.dump);
    // With a PostgreSQL vault the ledger lives in the same database (unless a ledger file is named).
    const ledgerAt =
      tt.config.dbUrl !== '' && options.ledger === undefined ? { url: tt.config.dbUrl } : { path: ledgerPath ?? '' };
    const ledger = ledgerPath === undefined ? undefined : await openLedger(ledgerAt);
    return { tt, dump, ledger };
  } catch (error) {
    if (options.terminator === undefined) await tt.close();
    throw error;
  }
}

/** The `--dump` file: one line per delivered request. */
type DumpWriter = ReturnType<typeof openPrivateStream>;

/**
 * The dump holds complete prompts and tool output: 0600 like the vault, an existing file truncated and
 * narrowed too. Synchronous writes: after a crash it holds exactly the requests delivered so far.
 */
function openPrivateStream(path: string) {
  const fd = openSync(path, 'w', 0o600);
  try {
    fchmodSync(fd, 0o600);
  } catch (error) {
    closeSync(fd);
    throw error;
  }
  return { write: (line: string) => void writeSync(fd, line), close: () => closeSync(fd) };
}

/**
 * Number of requests a session produces (assistant messages with at least one earlier message).
 *
 * @example
 * requestCount({ id: 's1', messages: [{ role: 'user' }, { role: 'assistant' }, { role: 'user' }, { role: 'assistant' }] }); // 2
 */
export function requestCount(session: RecordedSession): number {
  return session.messages.reduce((n, m, i) => n + (m['role'] === 'assistant' && i > 0 ? 1 : 0), 0);
}

type Sample = RequestSample & { readonly saved: Readonly<Record<string, number>> };

/** Whether the raw and the final request are over W − R, and what the window fit did with this one. */
async function windowSample(
  w: WindowCheck,
  raw: ProviderRequest,
  final: ProviderRequest,
  decisions: readonly Decision[],
): Promise<NonNullable<Sample['window']>> {
  const signal = new AbortController().signal;
  const over = async (r: ProviderRequest): Promise<boolean> =>
    (await w.counter.countRequest(r, signal)) + w.reserve > w.window;
  const fit = decisions.filter((x) => x.stage === STAGES.fitWindow);
  return {
    overRaw: await over(raw),
    overSent: await over(final),
    rewrite: fit.some((x) => x.kind === 'applied' && x.reason.endsWith('new batch')),
    exceeded: fit.some((x) => x.reason.startsWith('window_exceeded')),
  };
}

/** With a window: W, R and the count the cap makes (Σ per-part tokens of the provider-visible request). */
interface WindowCheck {
  readonly window: number;
  readonly reserve: number;
  readonly counter: BudgetCounter;
}

interface Deps {
  readonly window: WindowCheck | undefined;
  readonly tt: Terminator;
  readonly meter: MessagesMeter;
  readonly ledger: Ledger | undefined;
  readonly dump: DumpWriter | undefined;
  readonly now: () => number;
  readonly runId: string;
  onRequest(sample: Sample): void;
  onExtraTime(ms: number): void;
}

/** A message of the recording, and a tool call it made. */
type Message = Readonly<Record<string, unknown>>;
type Call = { name: string; args: Message };

/** One session's replay: the host's transcript (tool results reduced), a request per assistant message. */
class SessionReplay {
  // Each replay run is its own ledger session (`replay:<run>:<id>`), so replays of the same
  // recording under two modes compare instead of contaminating one another.
  private readonly ledgerId: string;
  private readonly mode: Mode;
  private readonly verifier: ReceiptVerifier;
  private readonly original: readonly Message[];
  private readonly fidelity: FidelityTracker;
  private readonly sight: SightTracker;
  private readonly reduced: Message[] = [];
  private readonly calls = new Map<string, Call>();
  private readonly toolSavings = new WeakMap<object, Record<string, number>>();
  private prevRaw: readonly unknown[] | undefined;
  private prevFinal: readonly unknown[] | undefined;
  private pendingMs = 0;
  private index = 0;
  private turn = 0;
  private turnTokens = 0;

  constructor(
    private readonly session: RecordedSession,
    private readonly d: Deps,
  ) {
    const tt = d.tt;
    this.ledgerId = `replay:${d.runId}:${session.id}`;
    this.mode = tt.config.mode;
    this.verifier = new ReceiptVerifier(tt.vault);
    this.original = session.messages;
    this.fidelity = new FidelityTracker(this.original, observationTest('replay', tt.config.observationPattern));
    this.sight = new SightTracker(this.original, (j) => this.fidelity.isOutput(j), this.fidelity.counts);
  }

  async run(): Promise<FidelityCounts> {
    const { d, session, ledgerId, mode } = this;
    await d.ledger?.ensureSession(
      session.model === undefined ? { sessionId: ledgerId, mode } : { sessionId: ledgerId, mode, model: session.model },
    );
    for (let i = 0; i < this.original.length; i++) {
      const msg = this.original[i]!;
      const role = msg['role'];
      if (role === 'user' && d.ledger !== undefined) await this.startTurn(msg, d.ledger);
      if (role === 'assistant' && i > 0) await this.request(i);
      if (role === 'assistant') rememberCalls(msg, this.calls);
      // A recognised text-protocol observation is the output of the command block before it: it goes
      // through the tool stream as a terminal result, as a host integrating the agent would send it.
      const observation = role === 'user' && this.fidelity.isOutput(i) && typeof msg['content'] === 'string';
      if ((role === 'tool' || observation) && typeof msg['content'] === 'string')
        this.reduced.push(await this.toolResult(i, msg, msg['content'], observation));
      else this.reduced.push(msg);
    }
    if (this.pendingMs > 0) d.onExtraTime(this.pendingMs);
    await this.finishTurn();
    return this.fidelity.counts;
  }

  private async finishTurn(): Promise<void> {
    if (this.turn > 0)
      await this.d.ledger?.finishTurn({
        sessionId: this.ledgerId,
        turnId: `t${this.turn}`,
        usage: { inputTokens: this.turnTokens },
        outcome: 'completed',
      });
  }

  private async startTurn(msg: Message, ledger: Ledger): Promise<void> {
    await this.finishTurn();
    this.turn++;
    this.turnTokens = 0;
    const content = msg['content'];
    const base = {
      sessionId: this.ledgerId,
      turnId: `t${this.turn}`,
      mode: this.mode,
      prompt: typeof content === 'string' ? content : '',
    };
    await ledger.startTurn(this.session.model === undefined ? base : { ...base, model: this.session.model });
  }

  /** The request the host sends before assistant message `i`: reduced, measured and recorded. */
  private async request(i: number): Promise<void> {
    const { session, d } = this;
    const sessionId = session.id;
    const rawMessages = this.original.slice(0, i);
    const request = {
      ...(session.model === undefined ? {} : { model: session.model }),
      messages: this.reduced.slice(0, i),
      ...(session.tools === undefined ? {} : { tools: session.tools }),
    };
    const rawRequest: ProviderRequest = { ...request, messages: rawMessages };
    const context: StepContext = {
      sessionId,
      requestId: `${sessionId}#${this.index}`,
      ...(session.model === undefined ? {} : { route: { model: session.model } }),
    };
    const t0 = d.now();
    const out = await d.tt.reduceRequest(request, context);
    const ms = d.now() - t0 + this.pendingMs;
    this.pendingMs = 0;
    const finalRequest = out.value;
    const finalMessages = Array.isArray(finalRequest['messages'])
      ? (finalRequest['messages'] as unknown[])
      : (request['messages'] as unknown[]);
    const ids = this.verifier.referenced(finalMessages);
    const recovered = await this.verifier.verify(ids);
    this.fidelity.request(i, finalMessages);
    const { recoveryChars } = this.sight.request(i, finalMessages);
    const saved: Record<string, number> = {};
    for (const m of this.reduced.slice(0, i))
      for (const [stage, chars] of Object.entries(this.toolSavings.get(m) ?? {}))
        saved[stage] = (saved[stage] ?? 0) + chars;
    savedByStage(out.decisions, saved);
    const sample: Sample = {
      ...this.sizes(rawMessages, finalMessages),
      receipts: ids.length,
      recovered,
      ms,
      recoveryChars,
      saved,
      ...(d.window === undefined
        ? {}
        : { window: await windowSample(d.window, rawRequest, finalRequest, out.decisions) }),
    };
    await this.record(rawRequest, out, context, sample);
    d.dump?.write(`${JSON.stringify({ session: sessionId, index: this.index, final: finalRequest })}\n`);
    d.onRequest(sample);
    this.index++;
  }

  /** A request's sizes beside the previous request's. */
  private sizes(rawMessages: readonly unknown[], finalMessages: readonly unknown[]) {
    const meter = this.d.meter;
    const [reusePrefix, reuseBase] =
      this.prevFinal === undefined ? [0, 0] : itemPrefix(this.prevFinal, finalMessages, meter);
    const sizes = {
      rawChars: meter.chars(rawMessages),
      finalChars: meter.chars(finalMessages),
      rawTokens: meter.tokens(rawMessages),
      finalTokens: meter.tokens(finalMessages),
      rawPrefix: commonPrefixChars(this.prevRaw, rawMessages, meter),
      finalPrefix: commonPrefixChars(this.prevFinal, finalMessages, meter),
      reusePrefix,
      reuseBase,
    };
    this.prevRaw = rawMessages;
    this.prevFinal = finalMessages;
    return sizes;
  }

  /** The request's metrics row in the vault and its entry in the ledger. */
  private async record(
    rawRequest: ProviderRequest,
    out: Step<ProviderRequest>,
    context: StepContext,
    sample: Sample,
  ): Promise<void> {
    const { session, d } = this;
    const meter = d.meter;
    const skillCuts = createSkillCuts();
    await d.tt.vault.recordRequestMetric(
      requestMetric({
        sessionId: this.session.id,
        requestId: context.requestId!,
        mode: this.mode,
        ...(session.model === undefined ? {} : { model: session.model }),
        raw: attributeRequest(rawRequest, meter, skillCuts),
        final: attributeRequest(out.value, meter, skillCuts),
        rawTokens: sample.rawTokens,
        finalTokens: sample.finalTokens,
        tokenizer: meter.counter.name,
        receipts: sample.receipts,
        failedOpen: anyFailedOpen(out.decisions),
        savedByStage: sample.saved,
      }),
    );
    await d.ledger?.recordRequest({
      sessionId: this.ledgerId,
      ...(this.turn > 0 ? { turnId: `t${this.turn}` } : {}),
      rawTokens: sample.rawTokens,
      finalTokens: sample.finalTokens,
    });
    this.turnTokens += sample.finalTokens;
  }

  /** Tool output `i` through the tool stream: what the host keeps in its transcript. */
  private async toolResult(i: number, msg: Message, text: string, observation: boolean): Promise<Message> {
    const callId =
      typeof msg['tool_call_id'] === 'string' ? msg['tool_call_id'] : observation ? `observation-${i}` : '';
    const command = observation ? lastCommand(this.original, i) : undefined;
    const call = observation
      ? { name: 'terminal', args: command === undefined ? {} : { command } }
      : this.calls.get(callId);
    const hostName = call?.name ?? 'tool';
    const name = this.d.tt.config.toolNames[hostName] ?? REPLAY_TOOL_NAMES[hostName] ?? hostName;
    // A host integrating the agent reduces the command's own output, then wraps it in its template.
    const wrapped = observation ? unwrapObservation(text) : undefined;
    const result =
      wrapped === undefined
        ? { content: text }
        : { content: wrapped.output, ...(wrapped.exitCode === undefined ? {} : { exitCode: wrapped.exitCode }) };
    const t0 = this.d.now();
    const step = await this.d.tt.reduceToolResult(
      { callId, name, args: call?.args ?? {}, ...result },
      { sessionId: this.session.id },
    );
    this.pendingMs += this.d.now() - t0;
    const content =
      wrapped === undefined || step.value.content === wrapped.output
        ? step.value.content
        : wrapped.wrap(step.value.content);
    const kept =
      content === text || (wrapped !== undefined && step.value.content === wrapped.output) ? msg : { ...msg, content };
    if (kept !== msg) this.toolSavings.set(kept, savedByStage(step.decisions));
    return kept;
  }
}

/**
 * mini-swe-agent's observation template (`<returncode>N</returncode>` then the output inside
 * `<output>…</output>`): the command's own output and exit code, and how to put a reduced output
 * back into the same template. Undefined for any other shape (it goes through as it is).
 */
export function unwrapObservation(
  text: string,
): { output: string; exitCode?: number; wrap(output: string): string } | undefined {
  const m = /^(\s*<returncode>(-?\d+)<\/returncode>\s*<output>\n?)([\s\S]*?)(\n?<\/output>\s*)$/.exec(text);
  if (m === null) return undefined;
  const [, head, code, output, tail] = m;
  return { output: output!, exitCode: Number(code), wrap: (reduced) => `${head!}${reduced}${tail!}` };
}

/** The last fenced command block of the assistant message before message `i`, if any. */
function lastCommand(messages: readonly Message[], i: number): string | undefined {
  const content = messages.slice(0, i).findLast((m) => m['role'] === 'assistant')?.['content'];
  return typeof content === 'string' ? fencedBlocks(content).at(-1)?.trim() : undefined;
}

function rememberCalls(msg: Message, calls: Map<string, Call>): void {
  const toolCalls = msg['tool_calls'];
  if (!Array.isArray(toolCalls)) return;
  for (const c of toolCalls) {
    if (typeof c !== 'object' || c === null) continue;
    const call = c as Record<string, unknown>;
    const fn = call['function'] as Record<string, unknown> | undefined;
    if (typeof call['id'] !== 'string' || typeof fn?.['name'] !== 'string') continue;
    calls.set(call['id'], { name: fn['name'], args: parseArgs(fn['arguments']) });
  }
}
