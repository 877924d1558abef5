/**
 * The README's LangChain v1 snippet (createAgent + tokenTerminatorMiddleware, no route given) with
 * the real ChatOpenAI / ChatAnthropic models against a loopback provider that enforces each
 * model's real output limit with the provider's wording: every first request must succeed.
 */
import { ChatAnthropic } from '@langchain/anthropic';
import { ChatOpenAI } from '@langchain/openai';
import { createAgent } from 'langchain';
import { describe, expect, it } from 'vitest';
import { tokenTerminatorMiddleware } from '../../adapters/langgraph/index.js';
import { useLimitsRig } from '../adapters/support/limits-rig.js';
import { SERVED_MODELS, sentCap, type LimitsServer } from '../adapters/support/limits-server.js';

const rig = useLimitsRig('tt-limits-lg-');

async function invoke(
  model: ChatOpenAI | ChatAnthropic,
  thread: string,
): Promise<{ answer: unknown; requests: LimitsServer['requests'] }> {
  const before = rig.server.requests.length;
  const agent = createAgent({ model, tools: [], middleware: [tokenTerminatorMiddleware(rig.terminator)] });
  const state = await agent.invoke(
    { messages: [{ role: 'user', content: 'Summarise the failing tests' }] },
    { configurable: { thread_id: thread } },
  );
  return { answer: state.messages.at(-1)?.content, requests: rig.server.requests.slice(before) };
}

describe('README: LangChain createAgent + tokenTerminatorMiddleware', () => {
  it.each(['gpt-4o', 'gpt-4.1', 'o3', 'deepseek-chat'])('ChatOpenAI %s succeeds on the first request', async (name) => {
    const model = new ChatOpenAI({
      model: name,
      apiKey: 'test',
      maxRetries: 0,
      configuration: { baseURL: `${rig.server.url}/v1` },
    });
    const { answer, requests } = await invoke(model, `lg-${name}`);
    expect(answer).toBe('done');
    expect(requests.map((r) => `${r.status} ${r.error ?? ''}`.trim())).toEqual(['200']);
    const cap = sentCap(requests[0]!.body);
    expect(cap).toBeGreaterThan(0);
    expect(cap).toBeLessThanOrEqual(SERVED_MODELS[name]!.maxOutput);
  });

  it.each(['claude-sonnet-4-5', 'claude-haiku-4-5', 'claude-opus-4-1'])(
    'ChatAnthropic %s succeeds on the first request',
    async (name) => {
      const model = new ChatAnthropic({ model: name, apiKey: 'test', maxRetries: 0, anthropicApiUrl: rig.server.url });
      const { answer, requests } = await invoke(model, `lg-${name}`);
      expect(answer).toBe('done');
      expect(requests.map((r) => `${r.status} ${r.error ?? ''}`.trim())).toEqual(['200']);
      expect(sentCap(requests[0]!.body)).toBeLessThanOrEqual(SERVED_MODELS[name]!.maxOutput);
    },
  );

  it('ChatAnthropic with a maxTokens above the model ceiling gets the ceiling', async () => {
    const model = new ChatAnthropic({
      model: 'claude-opus-4-1',
      apiKey: 'test',
      maxRetries: 0,
      anthropicApiUrl: rig.server.url,
      maxTokens: 64_000,
      clientOptions: { timeout: 600_000 },
    });
    const { requests } = await invoke(model, 'lg-opus-ceiling');
    expect(requests.map((r) => r.status)).toEqual([200]);
    expect(sentCap(requests[0]!.body)).toBe(32_000);
  });
});
