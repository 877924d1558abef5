/**
 * A Model (or ModelProvider) wrapper that applies the pipeline's output cap as
 * `modelSettings.maxTokens` (Responses → `max_output_tokens`, Chat → `max_tokens`). A smaller cap
 * the caller already set always wins.
 */
import type { Model, ModelProvider, ModelRequest } from '@openai/agents';
import { override } from '../custom-loop/openai.js';
import type { CapLedger } from './cap-ledger.js';

function capRequest(request: ModelRequest, ledger: CapLedger): ModelRequest {
  try {
    const cap = ledger.take(request.input);
    if (cap === undefined) return request;
    const current = request.modelSettings.maxTokens;
    const maxTokens = typeof current === 'number' && current > 0 ? Math.min(current, cap) : cap;
    return maxTokens === current ? request : { ...request, modelSettings: { ...request.modelSettings, maxTokens } };
  } catch {
    return request;
  }
}

/** Wrap a Model; every other member of the model is forwarded unchanged. */
export function wrapModel<M extends Model>(model: M, ledger: CapLedger): M {
  const getResponse = (request: ModelRequest) => model.getResponse(capRequest(request, ledger));
  const getStreamedResponse = (request: ModelRequest) => model.getStreamedResponse(capRequest(request, ledger));
  return override(override(model, 'getResponse', getResponse), 'getStreamedResponse', getStreamedResponse);
}

/** Wrap a ModelProvider so every model it returns is wrapped. */
export function wrapModelProvider(provider: ModelProvider, ledger: CapLedger): ModelProvider {
  return {
    getModel: async (name?: string) => wrapModel(await provider.getModel(name), ledger),
  };
}
