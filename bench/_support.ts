/** What several benchmarks share (not a benchmark itself: bench/run.ts skips files starting with `_`). */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Client } from 'undici';
import type { Mode } from '../src/config/types.js';
import type { TokenCounter } from '../src/measure/types.js';
import { readSessions, type RecordedSession } from '../src/replay/index.js';
import { createTerminator, type Terminator } from '../src/runtime/index.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The request bodies of the sample session (one per assistant turn after the first) of 50–200 kB. */
export function sampleBodies(): string[] {
  const session = JSON.parse(readFileSync(join(ROOT, 'examples/sessions/sample.jsonl'), 'utf8').split('\n')[0]!) as {
    model?: string;
    messages: { role: string }[];
  };
  const out: string[] = [];
  session.messages.forEach((m, i) => {
    if (m.role !== 'assistant' || i === 0) return;
    const body = JSON.stringify({ model: session.model ?? 'gpt-4o', messages: session.messages.slice(0, i) });
    if (body.length >= 50_000 && body.length <= 200_000) out.push(body);
  });
  return out;
}

/** The whole (not streamed) answer a loopback upstream gives every chat request. */
export const CHAT_ANSWER = JSON.stringify({
  id: 'c',
  object: 'chat.completion',
  created: 0,
  model: 'm',
  choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
});

/** A loopback upstream answering every request with {@link CHAT_ANSWER}, and its URL. */
export async function startChatUpstream(): Promise<{ server: Server; url: string }> {
  const server = createServer({ noDelay: true }, (req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(CHAT_ANSWER);
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** Prints `rows` (the first is the header) as aligned columns: the `left` columns padded at the end, the rest at the start. */
export function printTable(rows: readonly (readonly string[])[], left: readonly number[] = [0]): void {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  for (const r of rows)
    console.log(
      r.map((cell, c) => (left.includes(c) ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  '),
    );
}

/** What a replay script (`[sessions.jsonl] [--limit n] [--mode m] …`) runs on. */
export interface ReplayScript {
  /** The value after `--name`, if given. */
  flag(name: string): string | undefined;
  readonly sessions: readonly RecordedSession[];
  /** Through `counter`, mode `--mode` (balanced), metrics off, vault errors thrown, a vault in `dir`. */
  readonly tt: Terminator;
  /** The temp directory of the vault (the caller removes it). */
  readonly dir: string;
}

/** The sessions and the Terminator of a replay script, from its command line. */
export async function replayScript(
  argv: readonly string[],
  name: string,
  counter: TokenCounter,
): Promise<ReplayScript> {
  const flag = (f: string): string | undefined => (argv.includes(f) ? argv[argv.indexOf(f) + 1] : undefined);
  const path =
    argv.find((a, i) => !a.startsWith('--') && (i === 0 || !argv[i - 1]!.startsWith('--'))) ??
    'examples/sessions/sample.jsonl';
  const sessions = await readSessions(path, Number(flag('--limit') ?? Infinity));
  const dir = mkdtempSync(join(tmpdir(), `tt-${name}-`));
  const tt = await createTerminator({
    overrides: { dbPath: join(dir, 'artifacts.sqlite3'), mode: (flag('--mode') ?? 'balanced') as Mode },
    counter,
    metrics: false, // as the replay bench: the live ledger still measures every request (telemetry)
    vaultErrors: 'throw',
  });
  return { flag, sessions, tt, dir };
}

/** Sends an agent's next request (bench proxy-load's conversations) to a proxy on `client` and reads the answer through. */
export async function sendNext(
  client: Client,
  agent: { next(): Buffer; readonly session: string },
  authorization: string,
): Promise<void> {
  const res = await client.request({
    path: '/v1/chat/completions',
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization, 'x-token-terminator-session': agent.session },
    body: agent.next(),
  });
  await res.body.dump();
}

/** `pid` and every process below it, from /proc. */
export function tree(pid: number): number[] {
  const parents = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const ppid = Number(readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
      parents.set(ppid, [...(parents.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const stack = [pid];
  while (stack.length > 0) {
    const p = stack.pop()!;
    out.push(p);
    stack.push(...(parents.get(p) ?? []));
  }
  return out;
}

/** RSS (bytes) of one process (0 when gone). */
export function rssOf(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? 0 : Number(m[1]) * 1024;
  } catch {
    return 0;
  }
}
