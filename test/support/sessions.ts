/** Recorded sessions for the replay and report tests: one search whose large output the pipeline reduces. */
import type { RecordedSession } from '../../src/replay/index.js';

type Message = RecordedSession['messages'][number];

/** `lines` grep-style match lines over nine files `src/<file>_N.ts`, each carrying `word`. */
export const searchMatches = (lines: number, word: string, file = 'a'): string =>
  Array.from({ length: lines }, (_, i) => `src/${file}_${i % 9}.ts:${i}: ${word} ${i % 5}`).join('\n');

/**
 * A Chat Completions session: the system prompt, "find it", one `search_files` call for `pattern`
 * (with `content` beside it) answered by `output`, then the messages `after`.
 */
export function searchSession(
  id: string,
  output: string,
  after: readonly Message[],
  call: { readonly content: string | null; readonly pattern: string } = { content: 'searching', pattern: 'match' },
): RecordedSession {
  return {
    id,
    model: 'gpt-4o',
    messages: [
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'find it' },
      {
        role: 'assistant',
        content: call.content,
        tool_calls: [
          {
            id: 'c1',
            type: 'function',
            function: { name: 'search_files', arguments: `{"pattern": "${call.pattern}"}` },
          },
        ],
      },
      { role: 'tool', tool_call_id: 'c1', content: output },
      ...after,
    ],
  };
}
