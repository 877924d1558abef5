/**
 * `eval --dry-run`: what a run will send, without sending anything. Both arms' first request of
 * every planned pair goes through its real pipeline (a throw-away vault) and is counted in
 * o200k_base; recovery and answers are what a live run adds on top (each recovered page costs
 * about its share of the off arm's evidence again, in the balanced arm only).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { canonicalJson } from '../measure/index.js';
import { evalTools, openArm, openingMessages, planEval, type EvalOptions, type EvalProtocol } from './run.js';

export interface EvalEstimate {
  readonly protocol: EvalProtocol;
  /** Mean o200k tokens of the first request per pair, per arm (messages and tools). */
  readonly off_first_request_tokens: number;
  readonly balanced_first_request_tokens: number;
  /** Lower bound of a run's input tokens: both arms' first requests over all planned pairs. */
  readonly min_input_tokens: number;
  /** If every balanced arm recovered its whole evidence: add about this many input tokens. */
  readonly full_recovery_extra_tokens: number;
}

export async function estimateEval(options: EvalOptions): Promise<EvalEstimate> {
  const { protocol, tasks } = planEval(options);
  const dir = mkdtempSync(join(tmpdir(), 'token-terminator-eval-estimate-'));
  const arms = { off: await openArm(dir, options.env, 'off'), balanced: await openArm(dir, options.env, 'balanced') };
  try {
    const sums = { off: 0, balanced: 0 };
    let evidence = 0;
    for (const task of tasks) {
      for (const arm of ['off', 'balanced'] as const) {
        const tt = arms[arm];
        const sessionId = `estimate:${task.index}:${tt.config.mode}`;
        const step = await tt.reduceToolResult(
          { callId: 'call_1', name: 'terminal', args: { command: task.command }, content: task.evidence },
          { sessionId },
        );
        const messages = [
          ...openingMessages(task),
          { role: 'tool', tool_call_id: 'call_1', content: step.value.content },
        ];
        const body = { model: options.model, messages, tools: evalTools(tt) };
        const sent = (await tt.reduceRequest(body, { sessionId, requestId: `${sessionId}#1` })).value;
        sums[arm] += tt.counter.count(
          canonicalJson({ messages: sent['messages'], tools: sent['tools'] }, { compact: true }),
        );
      }
      evidence += arms.off.counter.count(task.evidence);
    }
    const n = tasks.length;
    return {
      protocol,
      off_first_request_tokens: Math.round(sums.off / n),
      balanced_first_request_tokens: Math.round(sums.balanced / n),
      min_input_tokens: sums.off + sums.balanced,
      full_recovery_extra_tokens: evidence,
    };
  } finally {
    await arms.off.close();
    await arms.balanced.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
