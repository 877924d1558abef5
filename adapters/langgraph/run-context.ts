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
   * `configurable` object).
   *
   * @defaultValue one random id per adapter instance
   */
  readonly sessionId?: string | ((configurable: Readonly<Record<string, unknown>> | undefined) => string | undefined);
  /** Route fields that win over what the model reports (contextWindow, outputCap, ...). @defaultValue none */
  readonly route?: Route;
}

/** A resolver bound to one adapter instance (so the random fallback id is stable for it). */
export function sessionResolver(options: LangGraphRunOptions): (configurable: unknown) => string {
  const fallback = `langgraph:${randomUUID()}`;
  return (configurable) => {
    const conf =
      configurable !== null && typeof configurable === 'object' ? (configurable as Record<string, unknown>) : undefined;
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

/**
 * Model name, context window and output ceiling from the instance (`model.profile.maxInputTokens`,
 * `maxOutputTokens`), then the options; what neither gives comes from the built-in model table.
 */
export function routeForModel(model: unknown, options: LangGraphRunOptions): Route {
  const m = (model ?? {}) as {
    model?: unknown;
    modelName?: unknown;
    profile?: { maxInputTokens?: unknown; maxOutputTokens?: unknown };
  };
  let name: unknown;
  let window: unknown;
  let ceiling: unknown;
  try {
    name = m.model ?? m.modelName;
    window = m.profile?.maxInputTokens;
    ceiling = m.profile?.maxOutputTokens;
  } catch {
    // a model whose profile getter throws simply has no known window
  }
  const positive = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v > 0;
  return {
    provider: 'langchain',
    endpoint: '/v1/chat/completions',
    ...(typeof name === 'string' ? { model: name } : {}),
    ...(positive(window) ? { contextWindow: window } : {}),
    ...(positive(ceiling) ? { maxOutputTokens: ceiling } : {}),
    ...options.route,
  };
}
