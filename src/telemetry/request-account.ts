/**
 * One accounting for every host: what a request would have cost without us ("raw"), what it cost
 * (the request as sent plus its recovery rounds' continuations), and which stage saved what. The
 * runtime's facade and the gateway both measure here, so `stats`, `report` and `/metrics` read the
 * same figures. Raw has every tool output whole and no recovery tool: the gateway has it (the
 * client's body); an in-process host's raw request is the staged one with each rendering's raw size
 * back ({@link ToolCredits}).
 */
import { sessionStateKey, type ProviderRequest, type Decision, type StepContext } from '../step.js';
import { RECOVERY_TOOL_NAME } from '../receipts/index.js';
import { toolName } from '../model/read.js';
import { attributeRequest, type Attribution, type SkillCuts } from './attribution.js';
import type { MessagesMeter } from '../ledger/messages-meter.js';
import { anyFailedOpen, requestMetric, savedByStage } from './metrics.js';
import type { ToolCredits } from './tool-credits.js';
import type { RequestMetric } from '../vault/types.js';

/** One answered request, as a host hands it to {@link accountRequest}. */
export interface RequestToAccount {
  readonly context: StepContext;
  /** The request the request stages were given (its tool outputs possibly reduced already). */
  readonly staged: ProviderRequest;
  /**
   * What the host would have sent without us, when the host has it (the gateway: the client's
   * body).
   *
   * @defaultValue `staged` with each tool output's rendering replaced by its raw size
   */
  readonly raw?: ProviderRequest;
  /** The request as it went to the model (the recovery tool included when it was offered). */
  readonly sent: ProviderRequest;
  /** Requests the recovery rounds sent after the first one. */
  readonly continuations?: readonly ProviderRequest[];
  /** The request stages' decisions. */
  readonly decisions: readonly Decision[];
}

/** What the host's accounting shares between requests. */
export interface AccountingParts {
  readonly meter: MessagesMeter;
  readonly mode: string;
  /** The tool-output renderings this process made (credits per request); none: tool stages are not credited. */
  readonly credits?: ToolCredits | undefined;
  /** Receipts the sent request's conversation shows. */
  readonly receipts: (conversation: readonly unknown[]) => number;
  readonly skillCuts?: SkillCuts;
  /**
   * Each tools list without the recovery tool, one copy per list object, so the meter's memo keeps
   * hitting: a host keeps one for all its requests.
   *
   * @defaultValue none: a fresh copy per request
   */
  readonly toolLists?: WeakMap<readonly unknown[], readonly unknown[]>;
}

/** A request's figures: its metric row and ledger turn, and the sizes behind them. */
export interface RequestAccount {
  readonly row: RequestMetric;
  readonly rawTokens: number;
  /** Tokens of the sent request and its continuations. */
  readonly finalTokens: number;
  readonly sentTokens: number;
  readonly recoveryTokens: number;
  readonly saved: Readonly<Record<string, number>>;
}

/** The request without the recovery tool (the request itself when it does not offer it). */
function withoutRecoveryTool(request: ProviderRequest, toolLists?: AccountingParts['toolLists']): ProviderRequest {
  const tools = request['tools'];
  if (!Array.isArray(tools)) return request;
  let kept = toolLists?.get(tools);
  if (kept === undefined) {
    kept = tools.some((t) => toolName(t) === RECOVERY_TOOL_NAME)
      ? tools.filter((t) => toolName(t) !== RECOVERY_TOOL_NAME)
      : tools;
    toolLists?.set(tools, kept);
  }
  if (kept === tools) return request;
  if (kept.length > 0) return { ...request, tools: kept };
  const { tools: _ours, ...rest } = request;
  return rest;
}

/** An attribution with `chars` and `tokens` more in its tool results. */
function plusToolResults(a: Attribution, chars: number, tokens: number): Attribution {
  if (chars === 0 && tokens === 0) return a;
  const t = a.components.tool_results;
  return {
    totalChars: a.totalChars + chars,
    totalTokens: a.totalTokens + tokens,
    components: { ...a.components, tool_results: { chars: t.chars + chars, tokens: t.tokens + tokens } },
  };
}

/**
 * Measure one answered request: raw (what the host would have sent), final (sent plus
 * continuations), the savings of the request stages (their decisions) and of the tool-result
 * stages (each rendering the request showed, as far as it reached the model).
 *
 * @example
 * const { row } = accountRequest({ meter, mode: 'balanced', credits, receipts: () => 0 }, {
 *   context, staged: step.original, sent: step.value, decisions: step.decisions,
 * });
 */
export function accountRequest(parts: AccountingParts, input: RequestToAccount): RequestAccount {
  const { meter, credits, skillCuts } = parts;
  const key = sessionStateKey(input.context);
  const tools = credits?.account(key, input.staged, input.sent, meter.counter, input.raw, input.context.format);
  const rawRequest = withoutRecoveryTool(input.raw ?? input.staged, parts.toolLists);
  const measured = attributeRequest(rawRequest, meter, skillCuts);
  const raw =
    input.raw === undefined ? plusToolResults(measured, tools?.rawChars ?? 0, tools?.rawTokens ?? 0) : measured;
  const sent = input.sent === rawRequest ? measured : attributeRequest(input.sent, meter, skillCuts);
  const extra = (input.continuations ?? []).map((c) => attributeRequest(c, meter, skillCuts));
  const extraTokens = extra.reduce((n, a) => n + a.totalTokens, 0);
  const extraChars = extra.reduce((n, a) => n + a.totalChars, 0);
  const saved = savedByStage(input.decisions, { ...tools?.saved });
  const list = input.sent['messages'] ?? input.sent['input'];
  const model = input.staged['model'] ?? input.context.route?.model;
  const row = requestMetric({
    // Keyed by tenant and session: two tenants' rows of one session id stay apart, and a view can keep to one tenant.
    sessionId: key,
    requestId: input.context.requestId ?? `req-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`,
    mode: parts.mode,
    ...(typeof model === 'string' && model !== '' ? { model } : {}),
    raw,
    final: sent,
    rawTokens: raw.totalTokens,
    // Net of recovery: continuation requests are part of what this request cost.
    finalTokens: sent.totalTokens + extraTokens,
    tokenizer: meter.counter.name,
    receipts: Array.isArray(list) ? parts.receipts(list) : 0,
    failedOpen: anyFailedOpen(input.decisions),
    savedByStage: saved,
  });
  return {
    row: extraChars === 0 ? row : { ...row, finalChars: row.finalChars + extraChars },
    rawTokens: raw.totalTokens,
    finalTokens: sent.totalTokens + extraTokens,
    sentTokens: sent.totalTokens,
    recoveryTokens: extraTokens,
    saved,
  };
}
