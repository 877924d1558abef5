/**
 * One model turn of parallel tool calls as a conversation carries it: the assistant message with
 * every call, then the results in the order they arrived (one user message of `tool_result` blocks
 * in the Anthropic format; one `tool` message per result in Chat Completions).
 */
export interface ParallelCall {
  readonly id: string;
  readonly name: string;
  readonly input: Record<string, unknown>;
}

export interface ParallelResult {
  readonly id: string;
  readonly content: string;
}

/**
 * The messages of one turn: `calls` in the order the model made them, `results` in arrival order.
 *
 * @example
 * parallelTurn(false, 'step 0', [{ id: 'c0', name: 'bash', input: { command: 'ls' } }], [{ id: 'c0', content: 'a.ts' }]);
 */
export function parallelTurn(
  anthropic: boolean,
  text: string,
  calls: readonly ParallelCall[],
  results: readonly ParallelResult[],
): Record<string, unknown>[] {
  if (anthropic)
    return [
      {
        role: 'assistant',
        content: [
          { type: 'text', text },
          ...calls.map((c) => ({ type: 'tool_use', id: c.id, name: c.name, input: c.input })),
        ],
      },
      { role: 'user', content: results.map((r) => ({ type: 'tool_result', tool_use_id: r.id, content: r.content })) },
    ];
  return [
    {
      role: 'assistant',
      content: text,
      tool_calls: calls.map((c) => ({
        id: c.id,
        type: 'function',
        function: { name: c.name, arguments: JSON.stringify(c.input) },
      })),
    },
    ...results.map((r) => ({ role: 'tool', tool_call_id: r.id, content: r.content })),
  ];
}
