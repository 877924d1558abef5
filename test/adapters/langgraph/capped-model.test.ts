/**
 * Capped model instances are kept by the cache their middleware (or hook set) holds, not by the
 * process: one middleware reuses its capped instance run after run, another builds its own.
 */
import { describe, expect, it } from 'vitest';
import { cappedModel, type CappedModels } from '../../../adapters/langgraph/capped-model.js';

/** A model shaped like LangChain's: constructor fields kept as `lc_kwargs`, a `maxTokens` field. */
class FakeModel {
  static built = 0;
  readonly lc_kwargs: Record<string, unknown>;
  readonly maxTokens: number | undefined;
  constructor(fields: Record<string, unknown>) {
    FakeModel.built++;
    this.lc_kwargs = fields;
    this.maxTokens = fields['maxTokens'] as number | undefined;
  }
}

describe('cappedModel', () => {
  it('reuses the capped instance kept in the same cache, per cap', () => {
    const model = new FakeModel({ model: 'm' });
    const models: CappedModels = new WeakMap();
    const a = cappedModel(model, 1000, undefined, models);
    expect(a).not.toBe(model);
    expect(a.maxTokens).toBe(1000);
    expect(cappedModel(model, 1000, undefined, models)).toBe(a);
    expect(cappedModel(model, 2000, undefined, models).maxTokens).toBe(2000);
  });

  it('shares nothing between two caches (two middlewares), nor without one', () => {
    const model = new FakeModel({ model: 'm' });
    const first: CappedModels = new WeakMap();
    const second: CappedModels = new WeakMap();
    const a = cappedModel(model, 1000, undefined, first);
    const before = FakeModel.built;
    const b = cappedModel(model, 1000, undefined, second);
    expect(b).not.toBe(a);
    expect(FakeModel.built).toBe(before + 1);
    expect(cappedModel(model, 1000)).not.toBe(a);
  });
});
