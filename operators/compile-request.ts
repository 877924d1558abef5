import { STAGES } from '../src/stages.js';
import { stageOperator, type SessionReducer, type StageOperator } from '../src/operator-kit.js';
import type { ProviderRequest } from '../src/step.js';
import { requestStore } from '../src/vault/scoped-reads.js';
import { createConversationMemo } from '../src/compile/conversation.js';
import { sessionStateFactory } from '../src/compile/session.js';
import { compileSettings, reduceRequest, type CompileRequestOptions } from '../src/compile/reduce-request.js';

const STAGE = STAGES.compileRequest;

export type { CompileRequestOptions };

/**
 * History that keeps the trajectory. Old tool outputs become a digest (exit status, size, first
 * line, failure lines) plus a receipt, in batches the cache-economic rule approves; the
 * instruction prefix, every user message and every assistant action are never touched, and an
 * output is never replaced before this conversation saw it. Between rewrites compiled request N+1
 * starts with compiled request N byte for byte. A delta whose base the rewrite hid is replaced by
 * the output it stands for.
 *
 * @example
 * requests$.pipe(collapseDuplicates({ vault }), compileRequest({ vault, counter }))
 */
export function compileRequest(options: CompileRequestOptions): StageOperator<ProviderRequest> {
  const settings = compileSettings(options);
  const { inlineLeases } = settings;
  // Reads by id only through a session's scoped reads (`state.reads`): this stage's store has none.
  const vault = requestStore(options.vault);
  return stageOperator<ProviderRequest>({
    name: STAGE,
    open: () => {
      // The options were checked when the operator was built (prefixRecognition, recognitions).
      const newState = sessionStateFactory(options);
      // Synchronous until there is a history, so pass-through Steps emit synchronously.
      const reduce: SessionReducer<ProviderRequest> = (step, session) => {
        // The history the session's previous request had is recognised, not re-read (src/model/prefix.ts).
        const state = (session.compile ??= newState(step.context));
        const seen = state.requests.recognise(step.value, step.context.format);
        const view = seen.view;
        if (view.listKey === undefined || !view.itemInfo.some((i) => i.role === 'assistant')) return undefined;
        // Keyed, and its renderings stored, by tenant and session: two tenants' session ids never meet.
        session.conversation ??= createConversationMemo(vault, session.key, inlineLeases);
        return reduceRequest(step, state, seen, session.conversation, settings);
      };
      return { reduce };
    },
  });
}
