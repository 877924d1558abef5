/**
 * Where a LangGraph run's session id and route come from: the host's thread id (never the
 * model), the model instance's own name and profile, and the adapter's options.
 */
import { randomUUID } from 'node:crypto';
import type { Route } from '../../src/step.js';

/** Options shared by every LangGraph entry point. */
export interface LangGraphRunOptions {
  /**
   * Session id when the run config has no `configurable.thread_id` (string or a function of the
   * `configurable` object). Default: one random id per adapter instance.
   */
  readonly sessionId?: string | ((configurable: Readonly<Record<string, unknown>> | undefined) => string | undefined);
  /** Route fields that win over what the model reports (contextWindow, outputCap, ...). Default: none. */
  readonly route?: Route;
}

/** A resolver bound to one adapter instance (so the random fallback id is stable for it). */
export function sessionResolver(options: LangGraphRunOptions): (configurable: unknown) => string {
  const fallback = `langgraph:${randomUUID()}`;
  return (configurable) => {
    const conf = configurable !== null && typeof configurable === 'object' ? (configurable as Record<string, unknown>) : undefined;
    const thread = conf?.['thread_id'];
    if (typeof thread === 'string' && thread !== '') return thread;
    if (typeof thread === 'number') return String(thread);
    const custom = typeof options.sessionId === 'function' ? options.sessionId(conf) : options.sessionId;
    return custom ?? fallback;
  };
}

/** The model's `maxTokens` constructor field, when it has one. */
export function modelMaxTokens(model: unknown): number | undefined {
  const value = model !== null && typeof model === 'object' ? (model as { maxTokens?: unknown }).maxTokens : undefined;
  return typeof value === 'number' && value > 0 ? value : undefined;
}

/** Model name and context window from the instance (`model.profile.maxInputTokens`), then the options. */
export function routeForModel(model: unknown, options: LangGraphRunOptions): Route {
  const m = (model ?? {}) as { model?: unknown; modelName?: unknown; profile?: { maxInputTokens?: unknown } };
  let name: unknown;
  let window: unknown;
  try {
    name = m.model ?? m.modelName;
    window = m.profile?.maxInputTokens;
  } catch {
    // a model whose profile getter throws simply has no known window
  }
  const route: Route = {
    provider: 'langchain',
    endpoint: '/v1/chat/completions',
    ...(typeof name === 'string' ? { model: name } : {}),
    ...(typeof window === 'number' && window > 0 ? { contextWindow: window } : {}),
  };
  return { ...route, ...options.route };
}
