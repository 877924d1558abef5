/**
 * A scripted model on loopback for .ci/pack-check.mjs: it speaks Chat Completions, Responses and
 * Anthropic Messages (non-streamed), and plays one agent run:
 *
 * 1. asks the `bash` tool to run `command` (a failing pytest run, given by the caller);
 * 2. reads the first view of that output it is shown, and asks `token_terminator` for the artifact
 *    the view names (offset 0, then every `next_offset`);
 * 3. answers once the last page is in.
 *
 * `run()` reports what the model saw: the first view, whether the recovery tool was offered, and
 * the recovered text (the pages joined). Nothing here knows token-terminator's code.
 */
import { Buffer } from 'node:buffer';
import { createServer } from 'node:http';

const ARTIFACT = /a_[0-9a-f]{32}/;

function parsePage(text) {
  try {
    return JSON.parse(text);
  } catch {
    return { content: undefined, next_offset: null, error: text.slice(0, 200) };
  }
}

/** Text of a tool output in any of the three wire shapes (a string or a list of text parts). */
function textOf(content) {
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content.map((p) => (typeof p === 'string' ? p : typeof p?.text === 'string' ? p.text : '')).join('');
  return '';
}

/** The tool calls and outputs of a request, in order: { name, text } per output, and the tool names offered. */
function readRequest(path, body) {
  const names = new Map();
  const outputs = [];
  let offered;
  if (path.endsWith('/chat/completions')) {
    offered = (body.tools ?? []).map((t) => t.function?.name);
    for (const m of body.messages ?? []) {
      for (const c of m.tool_calls ?? []) names.set(c.id, c.function?.name);
      if (m.role === 'tool') outputs.push({ name: names.get(m.tool_call_id), text: textOf(m.content) });
    }
  } else if (path.endsWith('/responses')) {
    offered = (body.tools ?? []).map((t) => t.name);
    for (const item of Array.isArray(body.input) ? body.input : []) {
      if (item.type === 'function_call') names.set(item.call_id, item.name);
      if (item.type === 'function_call_output')
        outputs.push({ name: names.get(item.call_id), text: textOf(item.output) });
    }
  } else {
    offered = (body.tools ?? []).map((t) => t.name);
    for (const m of body.messages ?? []) {
      if (!Array.isArray(m.content)) continue;
      for (const block of m.content) {
        if (block.type === 'tool_use') names.set(block.id, block.name);
        if (block.type === 'tool_result')
          outputs.push({ name: names.get(block.tool_use_id), text: textOf(block.content) });
      }
    }
  }
  return { outputs, offered };
}

let counter = 0;
const nextId = (prefix) => `${prefix}${(counter += 1).toString().padStart(6, '0')}`;

function reply(path, body, call, text) {
  const model = body.model ?? 'scripted';
  if (path.endsWith('/chat/completions')) {
    const message = call
      ? {
          role: 'assistant',
          content: null,
          tool_calls: [
            {
              id: nextId('call_'),
              type: 'function',
              function: { name: call.name, arguments: JSON.stringify(call.args) },
            },
          ],
        }
      : { role: 'assistant', content: text };
    return {
      id: nextId('chatcmpl-'),
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model,
      choices: [{ index: 0, finish_reason: call ? 'tool_calls' : 'stop', logprobs: null, message }],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    };
  }
  if (path.endsWith('/responses')) {
    const output = call
      ? [
          {
            type: 'function_call',
            id: nextId('fc_'),
            call_id: nextId('call_'),
            name: call.name,
            arguments: JSON.stringify(call.args),
            status: 'completed',
          },
        ]
      : [
          {
            type: 'message',
            id: nextId('msg_'),
            role: 'assistant',
            status: 'completed',
            content: [{ type: 'output_text', text, annotations: [] }],
          },
        ];
    return {
      id: nextId('resp_'),
      object: 'response',
      created_at: Math.floor(Date.now() / 1000),
      status: 'completed',
      model,
      output,
      usage: {
        input_tokens: 10,
        output_tokens: 5,
        total_tokens: 15,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens_details: { reasoning_tokens: 0 },
      },
    };
  }
  return {
    id: nextId('msg_'),
    type: 'message',
    role: 'assistant',
    model,
    content: call
      ? [{ type: 'tool_use', id: nextId('toolu_'), name: call.name, input: call.args }]
      : [{ type: 'text', text }],
    stop_reason: call ? 'tool_use' : 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: 5 },
  };
}

/**
 * Start the model on 127.0.0.1. `run(command)` resets it for one agent run and returns the record
 * of that run; `url` is its origin.
 */
export async function startScriptedModel() {
  let run;
  const server = createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (raw += d));
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0];
      let body;
      try {
        body = JSON.parse(raw);
      } catch {
        res.writeHead(400).end();
        return;
      }
      if (req.method !== 'POST' || !/\/(chat\/completions|responses|messages)$/.test(path) || run === undefined) {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not scripted"}}');
        return;
      }
      run.requests += 1;
      const { outputs, offered } = readRequest(path, body);
      const shell = outputs.find((o) => o.name === 'bash');
      const pages = outputs.filter((o) => o.name === 'token_terminator');
      let call;
      let text;
      if (shell === undefined) {
        call = { name: 'bash', args: { command: run.command } };
      } else {
        run.firstView ??= shell.text;
        run.offered ||= offered.includes('token_terminator');
        const last = pages.at(-1);
        const page = last === undefined ? undefined : parsePage(last.text);
        if (page === undefined || (page.next_offset ?? null) !== null) {
          const id = page?.artifact_id ?? run.firstView.match(ARTIFACT)?.[0] ?? 'no-receipt';
          call = {
            name: 'token_terminator',
            args: { action: 'artifact_get', artifact_id: id, offset: page?.next_offset ?? 0, limit: 20000 },
          };
        } else {
          const contents = pages.map((p) => parsePage(p.text).content);
          run.recovered = contents.every((c) => typeof c === 'string') ? contents.join('') : undefined;
          run.recoveryError = page.error ?? (run.recovered === undefined ? last.text.slice(0, 300) : undefined);
          text = `Recovered ${run.recovered?.length ?? 0} chars; done.`;
        }
      }
      const out = JSON.stringify(reply(path, body, call, text));
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) }).end(out);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    run(command) {
      run = { command, requests: 0, firstView: undefined, offered: false, recovered: undefined };
      return run;
    },
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}
