/**
 * A scripted OpenAI-compatible model on a real loopback HTTP server, for the eval harness tests.
 * It "reads" like a model: it knows each task's question and planted fact (the same seed gives the
 * same tasks) and answers correctly exactly when every string the answer needs is visible in the
 * request it got (recovered pages included). When it is not, the `honest` model pages the artifact
 * back with the recovery tool; the `no-recover` model answers from what it sees and gets it wrong.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { makeTasks, type EvalTask } from '../../src/eval/index.js';
import { referencedArtifacts } from '../../src/receipts/index.js';

export interface ScriptedModelOptions {
  readonly policy: 'honest' | 'no-recover';
  readonly seed: number;
  readonly pairs: number;
  /** From this many answered requests on, report another system fingerprint. Default: never. */
  readonly driftAfter?: number;
  /** Answer without `usage` (the harness then counts o200k itself). Default: false. */
  readonly omitUsage?: boolean;
}

interface Message {
  role: string;
  content?: string | null;
  tool_call_id?: string;
}

export interface ScriptedModel {
  readonly url: string;
  /** Every request body, in arrival order. */
  readonly bodies: Record<string, unknown>[];
  /** Task index of every request, in arrival order. */
  readonly taskOf: number[];
  close(): Promise<void>;
}

/** Text the model can read in a request: tool outputs, with recovery pages decoded. */
function visibleTexts(messages: readonly Message[]): string[] {
  return messages
    .filter((m) => m.role === 'tool' && typeof m.content === 'string')
    .map((m) => {
      const text = m.content!;
      try {
        const page = JSON.parse(text) as { content?: unknown };
        return typeof page.content === 'string' ? page.content : text;
      } catch {
        return text;
      }
    });
}

function lastPage(messages: readonly Message[]): { artifact_id?: string; next_offset?: number | null } | undefined {
  const last = messages.at(-1);
  if (last?.role !== 'tool' || typeof last.content !== 'string') return undefined;
  try {
    return JSON.parse(last.content) as { artifact_id?: string; next_offset?: number | null };
  } catch {
    return undefined;
  }
}

function reply(
  messages: readonly Message[],
  task: EvalTask,
  policy: ScriptedModelOptions['policy'],
): Record<string, unknown> {
  const texts = visibleTexts(messages);
  // Pages of one artifact are read together, as a model concatenates them.
  const seen = texts.join('');
  if (task.needs.every((n) => seen.includes(n) || texts.some((t) => t.includes(n))))
    return { role: 'assistant', content: `The evidence shows it.\nANSWER: ${task.expected}` };
  const page = lastPage(messages);
  const receipt = referencedArtifacts(
    messages
      .filter((m) => m.role === 'tool')
      .map((m) => m.content ?? '')
      .join('\n'),
  )[0];
  if (policy === 'honest' && receipt !== undefined && !(page !== undefined && page.next_offset === null)) {
    const offset = page?.next_offset ?? 0;
    const args = { action: 'artifact_get', artifact_id: page?.artifact_id ?? receipt, offset, limit: 20000 };
    return {
      role: 'assistant',
      content: null,
      tool_calls: [
        {
          id: `rec-${offset}`,
          type: 'function',
          function: { name: 'token_terminator', arguments: JSON.stringify(args) },
        },
      ],
    };
  }
  return { role: 'assistant', content: 'I cannot see it in the output, so my best guess is:\nANSWER: 0' };
}

export async function startScriptedModel(options: ScriptedModelOptions): Promise<ScriptedModel> {
  const tasks = makeTasks(options.seed, options.pairs);
  const byQuestion = new Map(tasks.map((t) => [t.question, t]));
  const bodies: Record<string, unknown>[] = [];
  const taskOf: number[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { messages: Message[] };
      bodies.push(body);
      const question = body.messages.find((m) => m.role === 'user')?.content ?? '';
      const task = byQuestion.get(question);
      if (req.url !== '/v1/chat/completions' || task === undefined) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: task === undefined ? 'unknown task' : `no route ${req.url}` } }));
        return;
      }
      taskOf.push(task.index);
      const drifted = options.driftAfter !== undefined && bodies.length > options.driftAfter;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: `cc-${bodies.length}`,
          object: 'chat.completion',
          created: 0,
          model: 'scripted-reader-1',
          system_fingerprint: drifted ? 'fp_after' : 'fp_before',
          choices: [{ index: 0, message: reply(body.messages, task, options.policy), finish_reason: 'stop' }],
          ...(options.omitUsage === true
            ? {}
            : {
                usage: {
                  prompt_tokens: Math.ceil(JSON.stringify(body.messages).length / 4),
                  completion_tokens: 12,
                  total_tokens: 0,
                },
              }),
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    bodies,
    taskOf,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
