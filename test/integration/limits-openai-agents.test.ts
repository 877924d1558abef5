/**
 * The README's OpenAI Agents JS snippet (Runner with the wrapped OpenAIProvider, the agent naming
 * its model) against a loopback provider that enforces each model's real output limit with the
 * provider's wording: every first request must succeed.
 */
import { Agent, OpenAIProvider, Runner, setTracingDisabled } from '@openai/agents';
import OpenAI from 'openai';
import { beforeAll, describe, expect, it } from 'vitest';
import { createAgentsAdapter } from '../../adapters/openai-agents/index.js';
import { useLimitsRig } from '../adapters/support/limits-rig.js';
import { SERVED_MODELS, sentCap, type LimitsServer } from '../adapters/support/limits-server.js';

beforeAll(() => setTracingDisabled(true));
const rig = useLimitsRig('tt-limits-agents-');

async function runOnce(
  model: string,
  useResponses: boolean,
  maxTokens?: number,
): Promise<{ output: unknown; requests: LimitsServer['requests'] }> {
  const before = rig.server.requests.length;
  const tt = createAgentsAdapter(rig.terminator);
  const openAIClient = new OpenAI({ apiKey: 'test', baseURL: `${rig.server.url}/v1`, maxRetries: 0 });
  const runner = new Runner({
    modelProvider: tt.wrapModelProvider(new OpenAIProvider({ openAIClient, useResponses })),
  });
  const agent = new Agent({
    name: 'assistant',
    model,
    tools: [tt.recoveryTool],
    ...(maxTokens === undefined ? {} : { modelSettings: { maxTokens } }),
  });
  const result = await runner.run(agent, 'Summarise the failing tests', {
    context: { sessionId: `agents-${model}` },
    ...tt.runOptions(),
  });
  return { output: result.finalOutput, requests: rig.server.requests.slice(before) };
}

describe('README: OpenAI Agents JS Runner + createAgentsAdapter', () => {
  it.each(['gpt-4o', 'gpt-4.1', 'o3'])(
    'Responses %s succeeds on the first request, no cap added where the model ceiling applies anyway',
    async (model) => {
      const { output, requests } = await runOnce(model, true);
      expect(output).toBe('done');
      expect(requests.map((r) => `${r.status} ${r.error ?? ''}`.trim())).toEqual(['200']);
      expect(requests[0]!.path).toBe('/v1/responses');
      // The Responses API gives the model its ceiling when the request names none.
      expect(requests[0]!.body['max_output_tokens']).toBeUndefined();
      expect(SERVED_MODELS[model]!.maxOutput).toBeGreaterThan(0);
    },
  );

  it('Chat Completions deepseek-chat (open-weight) succeeds on the first request', async () => {
    const { output, requests } = await runOnce('deepseek-chat', false);
    expect(output).toBe('done');
    expect(requests.map((r) => `${r.status} ${r.error ?? ''}`.trim())).toEqual(['200']);
    expect(sentCap(requests[0]!.body)).toBe(8192);
  });

  it('an agent maxTokens above the model ceiling is lowered to it', async () => {
    const { requests } = await runOnce('gpt-4o', true, 100_000);
    expect(requests.map((r) => r.status)).toEqual([200]);
    expect(requests[0]!.body['max_output_tokens']).toBe(16_384);
  });
});
