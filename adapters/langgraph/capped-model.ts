/**
 * LangChain chat models read `maxTokens` from their constructor fields only (per-call max tokens
 * are ignored), so an output cap means a second model instance. Instances are cached per
 * (model, cap) in the cache the caller holds (one per middleware or hook set), so a stable cap
 * reuses one object run after run.
 */

/** Build a copy of `model` limited to `maxTokens`; return undefined when this model cannot be capped. */
export type CapModelFactory = (model: object, maxTokens: number) => object | undefined;

/** The options the middleware and the legacy hooks share about capped models and reduced results. */
export interface CapAndArtifactOptions {
  /** How to build a capped model. @defaultValue rebuild through the model's constructor with `maxTokens` */
  readonly capModel?: CapModelFactory;
  /** Keep the original text in `ToolMessage.artifact` when a result was reduced. @defaultValue true */
  readonly keepOriginalInArtifact?: boolean;
}

/** Capped instances by model and cap: one per middleware or hook set ({@link cappedModel}). */
export type CappedModels = WeakMap<object, Map<number, object>>;

const MAX_CAPS_PER_MODEL = 32;

/**
 * The default factory: a model that has a `maxTokens` field is rebuilt through its own constructor
 * from its serialized constructor fields (`lc_kwargs`) with `maxTokens` replaced.
 *
 * @example
 * const capped = cloneWithMaxTokens(new ChatOpenAI({ model: 'gpt-5' }), 4096);
 */
export const cloneWithMaxTokens: CapModelFactory = (model, maxTokens) => {
  if (!('maxTokens' in model)) return undefined;
  const kwargs = (model as { lc_kwargs?: unknown }).lc_kwargs;
  if (kwargs === null || typeof kwargs !== 'object') return undefined;
  const Ctor = model.constructor as new (fields: Record<string, unknown>) => object;
  return new Ctor({ ...(kwargs as Record<string, unknown>), maxTokens });
};

/**
 * The capped instance for `model` (kept in `cache`), or `model` itself when it cannot be capped
 * (the factory returns undefined or throws: the model keeps its own cap, fail-open).
 *
 * @param cache - where capped instances are kept; pass the same one call after call to reuse them.
 *   Default: a fresh one (no reuse).
 * @example
 * const models: CappedModels = new WeakMap();
 * const model = cappedModel(llm, compiled.cap ?? 4096, cloneWithMaxTokens, models);
 */
export function cappedModel<M extends object>(
  model: M,
  maxTokens: number,
  factory: CapModelFactory = cloneWithMaxTokens,
  cache: CappedModels = new WeakMap(),
): M {
  let byCap = cache.get(model);
  const hit = byCap?.get(maxTokens);
  if (hit !== undefined) return hit as M;
  let capped: object | undefined;
  try {
    capped = factory(model, maxTokens);
  } catch {
    return model;
  }
  if (capped === undefined) return model;
  if (byCap === undefined) {
    byCap = new Map();
    cache.set(model, byCap);
  }
  if (byCap.size >= MAX_CAPS_PER_MODEL) byCap.delete(byCap.keys().next().value as number);
  byCap.set(maxTokens, capped);
  return capped as M;
}
