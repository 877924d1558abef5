/**
 * OpenAI Agents JS with Token Terminator, offline. A hand-written Model asks for a large search,
 * sees a one-line receipt instead of the output, recovers the exact text with the
 * `token_terminator` function tool and answers; the run history keeps the original output.
 * Exits non-zero if any of that does not happen.
 *
 *   npm run example:openai-agents
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Agent,
  run,
  setTracingDisabled,
  tool,
  Usage,
  type AgentInputItem,
  type Model,
  type ModelRequest,
  type ModelResponse,
  type StreamEvent,
} from '@openai/agents';
import { createAgentsAdapter } from 'token-terminator/adapters/openai-agents';
import { referencedArtifacts, createTerminator } from 'token-terminator';

setTracingDisabled(true);
const OUTPUT = Array.from(
  { length: 1500 },
  (_, i) => `logs/app.log:${i + 1}: WARN request ${i} took ${(i * 7) % 900}ms`,
).join('\n');

type Item = { type?: string; name?: string; callId?: string; output?: unknown };
const outputOf = (item: AgentInputItem): string => {
  const out = (item as Item).output;
  return typeof out === 'string' ? out : String((out as { text?: unknown }).text);
};
const call = (callId: string, name: string, args: object): ModelResponse['output'] => [
  { type: 'function_call', callId, name, arguments: JSON.stringify(args), status: 'completed' },
];

/** Plays: search → recover every page of what the receipt names → answer. */
class ScriptedModel implements Model {
  readonly seen: { results: string[]; maxTokens: number | undefined }[] = [];
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const input = typeof request.input === 'string' ? [] : request.input;
    const results = input.filter((i) => (i as Item).type === 'function_call_result');
    this.seen.push({ results: results.map(outputOf), maxTokens: request.modelSettings.maxTokens });
    const last = results.at(-1) as Item | undefined;
    let output: ModelResponse['output'];
    if (last === undefined) output = call('search-1', 'search_files', { pattern: 'WARN' });
    else if (
      last.name === 'search_files' ||
      (JSON.parse(outputOf(last as AgentInputItem)).next_offset ?? null) !== null
    ) {
      const id = referencedArtifacts(outputOf(results[0]!))[0] ?? 'missing';
      const offset =
        last.name === 'search_files' ? 0 : (JSON.parse(outputOf(last as AgentInputItem)).next_offset as number);
      output = call(`get-${offset}`, 'token_terminator', {
        action: 'artifact_get',
        artifact_id: id,
        offset,
        limit: 20000,
      });
    } else
      output = [
        {
          type: 'message',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: 'Found 1500 warnings.' }],
        },
      ];
    return { usage: new Usage(), output };
  }
  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<StreamEvent> {
    throw new Error('not scripted');
  }
}

const dir = mkdtempSync(join(tmpdir(), 'tt-example-agents-'));
const terminator = await createTerminator({ overrides: { dbPath: join(dir, 'vault.sqlite3') } });
try {
  const tt = createAgentsAdapter(terminator, { route: { model: 'gpt-4o', contextWindow: 128_000 } });
  const searchFiles = tool({
    name: 'search_files',
    description: 'Search files for a pattern.',
    parameters: {
      type: 'object',
      properties: { pattern: { type: 'string' } },
      required: ['pattern'],
      additionalProperties: true,
    },
    strict: false,
    execute: async () => OUTPUT,
  });
  const model = new ScriptedModel();
  const agent = new Agent({
    name: 'searcher',
    instructions: 'Answer briefly.',
    model: tt.wrapModel(model),
    tools: [searchFiles, tt.recoveryTool],
  });
  const controller = new AbortController();
  const result = await run(agent, 'Count the warnings.', {
    context: { sessionId: 'example-agents' },
    ...tt.runOptions({ signal: controller.signal }),
  });

  const firstView = model.seen[1]!.results[0]!;
  assert.ok(firstView.length < OUTPUT.length / 4, 'the model saw the large output instead of a receipt');
  assert.equal(referencedArtifacts(firstView).length, 1, 'the model saw no artifact id');
  const history = result.history.filter((i) => (i as Item).type === 'function_call_result');
  assert.equal(outputOf(history[0]!), OUTPUT, 'the run history lost the original output');
  const pages = history
    .filter((i) => (i as Item).name === 'token_terminator')
    .map((i) => JSON.parse(outputOf(i)).content as string);
  assert.equal(pages.join(''), OUTPUT, 'recovery did not return the exact output');
  assert.ok(
    model.seen.every((s) => typeof s.maxTokens === 'number' && s.maxTokens > 0),
    'the output cap did not reach the model',
  );
  assert.equal(result.finalOutput, 'Found 1500 warnings.');
  console.log(
    `openai-agents example: model saw ${firstView.length} chars instead of ${OUTPUT.length}; recovered ${pages.length} page(s) exactly; cap ${model.seen[0]!.maxTokens}`,
  );
} finally {
  await terminator.close();
  rmSync(dir, { recursive: true, force: true });
}
