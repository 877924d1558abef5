/**
 * The migration session of the window tests (test/adapters/custom-loop/window.test.ts,
 * test/integration/proxy-window.test.ts): turn t asks about table t, and every 10th turn reads a
 * large file (100 lines) through a tool call.
 */

/** Turn t's question. */
export const question = (t: number): string => `Step ${t}: check the migration for table t${t}.`;

/** The file turn t reads. */
export const fileText = (t: number): string =>
  Array.from({ length: 100 }, (_, i) => `t${t}.sql:${i + 1}: ALTER TABLE t${t} ADD COLUMN c${i} INT; -- ${i * t}`).join(
    '\n',
  );

/** Turn t's file read in OpenAI Chat: the assistant's tool call, then the tool's result. */
export function chatRead(t: number): unknown[] {
  const id = `read-${t}`;
  return [
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id, type: 'function', function: { name: 'read_file', arguments: `{"path":"t${t}.sql"}` } }],
    },
    { role: 'tool', tool_call_id: id, content: fileText(t) },
  ];
}
