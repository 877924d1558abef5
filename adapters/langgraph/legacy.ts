/**
 * The legacy `createReactAgent` path (@langchain/langgraph/prebuilt): a `preModelHook` that
 * returns the compiled view as `llmInputMessages` (the `messages` channel keeps the originals), a
 * ToolNode subclass whose results go through the tool stream, and a dynamic `llm` that applies the
 * cap the hook computed for the session.
 */
import type { BaseMessage } from '@langchain/core/messages';
import { ToolMessage } from '@langchain/core/messages';
import type { LangGraphRunnableConfig } from '@langchain/langgraph';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import type { Terminator } from '../../src/runtime/types.js';
import { cappedModel, type CapAndArtifactOptions, type CappedModels } from './capped-model.js';
import { compileMessages } from './compile-messages.js';
import { langchainRecoveryTool } from './recovery-tool.js';
import { routeForModel, sessionResolver, type LangGraphRunOptions } from './run-context.js';
import { reduceToolMessage } from './tool-message.js';

type ToolNodeTools = ConstructorParameters<typeof ToolNode>[0];
type ToolNodeOptions = NonNullable<ConstructorParameters<typeof ToolNode>[1]>;
type ToolCall = { name: string; args: Record<string, unknown>; id?: string };

/** Options of {@link createReactAgentHooks}. */
export interface ReactAgentHookOptions extends LangGraphRunOptions, CapAndArtifactOptions {
  /** The chat model the agent uses (for its name, context window and cap). @defaultValue none (no window, no cap) */
  readonly model?: object;
}

interface ModelLike {
  bindTools?(tools: unknown[]): unknown;
}

/**
 * Hooks that put the pipeline into a legacy `createReactAgent` graph: a capped model, a tool node that reduces results, and a pre-model hook that compiles the messages.
 *
 * @example
 * const tt = createReactAgentHooks(terminator, { model: llm });
 * const agent = createReactAgent({ llm: tt.llm(llm, myTools), tools: tt.toolNode(myTools), preModelHook: tt.preModelHook });
 */
export function createReactAgentHooks(terminator: Terminator, options: ReactAgentHookOptions = {}) {
  const resolveSession = sessionResolver(options);
  const keepOriginal = options.keepOriginalInArtifact ?? true;
  const caps = new Map<string, number>();
  // Capped instances of the model, reused by these hooks only.
  const models: CappedModels = new WeakMap();

  const preModelHook = async (
    state: { messages: BaseMessage[] },
    config?: LangGraphRunnableConfig,
  ): Promise<{ llmInputMessages: BaseMessage[] }> => {
    const sessionId = resolveSession(config?.configurable);
    const compiled = await compileMessages(terminator, {
      messages: state.messages,
      model: options.model,
      sessionId,
      route: routeForModel(options.model, options),
      signal: config?.signal,
    });
    if (compiled.cap === undefined) caps.delete(sessionId);
    else caps.set(sessionId, compiled.cap);
    // Always answer: an empty update would leave the previous turn's view in the channel.
    return { llmInputMessages: compiled.messages };
  };

  const recoveryTool = langchainRecoveryTool(terminator, options, resolveSession);
  // Receipts can reach the model from any turn on, so the recovery tool is bound from the start, as
  // the last tool: the tool list (the front of the cached prompt prefix) never changes mid-session.
  const withRecovery = <T>(tools: readonly T[]): T[] =>
    tools.some((t) => (t as { name?: unknown }).name === recoveryTool.name)
      ? [...tools]
      : [...tools, recoveryTool as unknown as T];
  return {
    preModelHook,
    recoveryTool,
    /** A ToolNode whose results go through the tool stream (and that runs the recovery tool). */
    toolNode(tools: ToolNodeTools, toolNodeOptions?: ToolNodeOptions): ToolNode {
      const list = Array.isArray(tools) ? (withRecovery(tools as unknown[]) as unknown as ToolNodeTools) : tools;
      return new TerminatorToolNode(list, terminator, resolveSession, keepOriginal, toolNodeOptions);
    },
    /** A dynamic `llm` for createReactAgent: the model (capped when the hook set a cap) with `tools` and the recovery tool bound. */
    llm(model: object, tools: unknown[]) {
      const bound = withRecovery(tools);
      return async (_state: unknown, config?: LangGraphRunnableConfig): Promise<never> => {
        const cap = caps.get(resolveSession(config?.configurable));
        const chosen = (cap === undefined ? model : cappedModel(model, cap, options.capModel, models)) as ModelLike;
        return (chosen.bindTools === undefined ? chosen : chosen.bindTools(bound)) as never;
      };
    },
  };
}

/** ToolNode whose every ToolMessage goes through the tool stream before it enters the state. */
export class TerminatorToolNode extends ToolNode {
  readonly #terminator: Terminator;
  readonly #session: (configurable: unknown) => string;
  readonly #keepOriginal: boolean;

  constructor(
    tools: ToolNodeTools,
    terminator: Terminator,
    session: (configurable: unknown) => string,
    keepOriginal = true,
    options?: ToolNodeOptions,
  ) {
    super(tools, options);
    this.#terminator = terminator;
    this.#session = session;
    this.#keepOriginal = keepOriginal;
  }

  protected override async runTool(
    call: ToolCall,
    config: LangGraphRunnableConfig,
    state: unknown,
  ): ReturnType<ToolNode['runTool']> {
    const out = await super.runTool(call as never, config, state);
    if (!ToolMessage.isInstance(out)) return out;
    return reduceToolMessage(
      this.#terminator,
      out,
      call.args,
      { sessionId: this.#session(config.configurable) },
      config.signal,
      this.#keepOriginal,
    );
  }
}
