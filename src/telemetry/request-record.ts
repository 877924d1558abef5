/**
 * What the runtime records per compiled request, off the reduction's result: the metrics row in
 * the vault and the experiment ledger's turn. Both are diagnostics and never fail the call.
 */
import { randomUUID } from 'node:crypto';
import type { ActivityReading } from '../activity.js';
import { effectiveLedgerPath } from '../config/index.js';
import type { Config } from '../config/types.js';
import { contentText } from '../model/read.js';
import { sessionStateKey, type ProviderRequest, type Step } from '../step.js';
import { openLedger, type Ledger, type TurnRecord } from './ledger.js';
import type { RequestMetric, Vault } from '../vault/types.js';

/**
 * The metrics rows of a batch of requests in one write transaction; when that fails, each row on
 * its own, so a row the store refuses loses only itself. Never throws (telemetry).
 */
export async function recordRequestMetrics(vault: Vault, metrics: readonly RequestMetric[]): Promise<void> {
  if (metrics.length === 0) return;
  try {
    await vault.recordRequestMetrics(metrics);
    return;
  } catch {
    if (metrics.length === 1) return;
  }
  for (const metric of metrics) await vault.recordRequestMetric(metric).catch(() => undefined);
}

/** One request for {@link LiveLedger.recordAll}. */
export interface LiveLedgerEntry {
  readonly step: Pick<Step<ProviderRequest>, 'context' | 'original'>;
  readonly rawTokens: number;
  readonly finalTokens: number;
}

/** The experiment ledger as the facade writes it: one finished turn per compiled request. */
export interface LiveLedger {
  /** Record requests in one transaction (in order); never throws, a broken ledger stops recording. */
  recordAll(entries: readonly LiveLedgerEntry[]): Promise<void>;
  close(): Promise<void>;
}

/**
 * The live ledger of `config` (opened on first record), or undefined when `on` is false. For hosts
 * that measure requests themselves, off the request path (the gateway does it after the answer
 * went out), with `createTerminator({ ledger: false })`. On SQLite its checkpoints wait while
 * `activity` (the Terminator's) has reductions in flight.
 */
export function openLiveLedger(config: Config, on: boolean, activity?: ActivityReading): LiveLedger | undefined {
  if (!on) return undefined;
  let ledger: Promise<Ledger> | undefined;
  let broken = false;
  // With a PostgreSQL vault the ledger lives in the same database; on SQLite it is its own file.
  const open = (): Promise<Ledger> =>
    openLedger(
      config.dbUrl !== ''
        ? { url: config.dbUrl }
        : { path: effectiveLedgerPath(config), ...(activity === undefined ? {} : { activity }) },
    );
  const recordAll = async (entries: readonly LiveLedgerEntry[]): Promise<void> => {
    if (broken || entries.length === 0) return;
    try {
      ledger ??= open();
      const l = await ledger;
      const turns = entries.map(({ step, rawTokens, finalTokens }): TurnRecord => {
        const m = step.original['model'] ?? step.context.route?.model;
        const model = typeof m === 'string' && m !== '' ? { model: m } : {};
        // The tokens this request sends are the turn's input: what the mode changes.
        return {
          // The ledger's sessions are keyed like the metric rows: by tenant and session.
          sessionId: sessionStateKey(step.context),
          turnId: step.context.requestId ?? randomUUID(),
          mode: config.mode,
          experiment: config.experiment,
          prompt: lastUserText(step.original),
          ...model,
          rawTokens,
          finalTokens,
          usage: { inputTokens: finalTokens },
          outcome: 'completed',
        };
      });
      await l.recordTurns(turns);
    } catch {
      // The ledger is an experiment record: an unwritable file must not touch the host's request.
      broken = true;
    }
  };
  return {
    recordAll,
    // Never opened, or already closed: nothing to close.
    close: async () => ledger?.then((l) => l.close()).catch(() => undefined),
  };
}

/** The text of the request's last user message (Chat, Responses or Anthropic shape); fingerprinted, never stored. */
function lastUserText(request: ProviderRequest): string {
  const list = request['messages'] ?? request['input'];
  if (typeof list === 'string') return list;
  const last: unknown = Array.isArray(list)
    ? list.findLast((item) => (item as { role?: unknown } | null)?.role === 'user')
    : undefined;
  return contentText((last as { content?: unknown } | undefined)?.content) ?? '';
}
