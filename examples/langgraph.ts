/**
 * LangChain v1 `createAgent` with Token Terminator, offline. A scripted chat model asks for a large
 * search, sees a one-line receipt instead of the output, recovers the exact text with the
 * `token_terminator` tool and answers. Exits non-zero if any of that does not happen.
 *
 *   npm run example:langgraph
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BaseChatModel, type BaseChatModelParams } from '@langchain/core/language_models/chat_models';
import type { ChatResult } from '@langchain/core/outputs';
import { MemorySaver } from '@langchain/langgraph';
import { AIMessage, createAgent, tool, ToolMessage, type BaseMessage } from 'langchain';
import { tokenTerminatorMiddleware } from 'token-terminator/adapters/langgraph';
import { referencedArtifacts, createTerminator } from 'token-terminator';

const OUTPUT = Array.from(
  { length: 1500 },
  (_, i) => `src/module_${i % 40}.ts:${i + 1}: const value${i} = compute(${i}); // TODO check overflow`,
).join('\n');
const text = (m: BaseMessage): string => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content));

/** Plays three turns: search → recover every page of what the receipt names → answer. */
class ScriptedModel extends BaseChatModel {
  maxTokens: number | undefined;
  readonly seen: { toolTexts: string[]; maxTokens: number | undefined }[];
  constructor(fields: BaseChatModelParams & { seen: ScriptedModel['seen']; maxTokens?: number }) {
    super(fields);
    this.seen = fields.seen;
    this.maxTokens = fields.maxTokens;
  }
  _llmType(): string {
    return 'scripted';
  }
  override bindTools(): this {
    return this;
  }
  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const toolTexts = messages.filter((m) => m.getType() === 'tool').map(text);
    this.seen.push({ toolTexts, maxTokens: this.maxTokens });
    const last = messages.at(-1)!;
    let message: AIMessage;
    if (last.getType() === 'human') {
      message = new AIMessage({
        content: '',
        tool_calls: [{ id: 'search-1', name: 'search_files', args: { pattern: 'TODO' }, type: 'tool_call' }],
      });
    } else if ((last as ToolMessage).name === 'search_files' || (JSON.parse(text(last)).next_offset ?? null) !== null) {
      // Page on with the id of its own previous call; the first id comes from the view it was shown
      // (later requests may show that view as a receipt of its own).
      const previous = messages.findLast(
        (m): m is AIMessage => AIMessage.isInstance(m) && m.tool_calls?.[0]?.name === 'token_terminator',
      );
      const id =
        (previous?.tool_calls?.[0]?.args['artifact_id'] as string | undefined) ??
        referencedArtifacts(toolTexts[0]!)[0] ??
        'missing';
      const offset = (last as ToolMessage).name === 'search_files' ? 0 : (JSON.parse(text(last)).next_offset as number);
      message = new AIMessage({
        content: '',
        tool_calls: [
          {
            id: `get-${offset}`,
            name: 'token_terminator',
            args: { action: 'artifact_get', artifact_id: id, offset, limit: 20000 },
            type: 'tool_call',
          },
        ],
      });
    } else {
      message = new AIMessage({ content: 'Found 1500 TODOs.' });
    }
    return { generations: [{ text: '', message }] };
  }
}

const dir = mkdtempSync(join(tmpdir(), 'tt-example-langgraph-'));
const terminator = await createTerminator({ overrides: { dbPath: join(dir, 'vault.sqlite3') } });
try {
  const searchFiles = tool(async () => OUTPUT, {
    name: 'search_files',
    description: 'Search files for a pattern.',
    schema: { type: 'object', properties: { pattern: { type: 'string' } } } as never,
  });
  const seen: ScriptedModel['seen'] = [];
  const agent = createAgent({
    model: new ScriptedModel({ seen }),
    tools: [searchFiles],
    middleware: [tokenTerminatorMiddleware(terminator, { route: { model: 'gpt-4o', contextWindow: 128_000 } })],
    checkpointer: new MemorySaver(),
  });
  const result = await agent.invoke(
    { messages: [{ role: 'user', content: 'Find the TODOs.' }] },
    { configurable: { thread_id: 'example-langgraph' } },
  );

  const firstView = seen[1]!.toolTexts[0]!;
  assert.ok(firstView.length < OUTPUT.length / 4, 'the model saw the large output instead of a receipt');
  assert.equal(referencedArtifacts(firstView).length, 1, 'the model saw no artifact id');
  const pages = result.messages
    .filter((m) => ToolMessage.isInstance(m) && m.name === 'token_terminator')
    .map((m) => JSON.parse(text(m)).content as string);
  assert.equal(pages.join(''), OUTPUT, 'recovery did not return the exact output');
  assert.ok(
    seen.every((s) => typeof s.maxTokens === 'number' && s.maxTokens > 0),
    'the output cap did not reach the model',
  );
  assert.equal(result.messages.at(-1)!.content, 'Found 1500 TODOs.');
  console.log(
    `langgraph example: model saw ${firstView.length} chars instead of ${OUTPUT.length}; recovered ${pages.length} page(s) exactly; cap ${seen[0]!.maxTokens}`,
  );
} finally {
  await terminator.close();
  rmSync(dir, { recursive: true, force: true });
}
