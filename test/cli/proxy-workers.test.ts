/**
 * `token-terminator proxy --workers 2` through the real CLI in a child process (issue 32): two
 * processes answer on one port; a worker killed with SIGKILL is replaced and requests keep being
 * answered; receipts issued before the kill (by either worker) still recover exactly, from the
 * shared SQLite vault; SIGTERM stops the primary and every worker.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { workerExecArgv } from '../../src/cli/commands/proxy-workers.js';
import { firstArtifact, recoveryCall, testRunOutput } from '../proxy/support/harness.js';
import { chat, startUpstream, type Recorded, type Reply } from '../proxy/support/upstream.js';
import { spawnProxy, stopProcess } from '../support/proxy-process.js';

const dir = mkdtempSync(join(tmpdir(), 'tt-proxy-workers-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Msg = { role: string; content: string | null; tool_call_id?: string; tool_calls?: unknown[] };
const output = (i: number): string => testRunOutput(500, 100 + i);
const opening = (i: number): Msg[] => [
  { role: 'system', content: `You are coding agent ${i}.` },
  { role: 'user', content: 'Run the tests.' },
  {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: `run-${i}`, type: 'function', function: { name: 'terminal', arguments: '{"command":"t"}' } }],
  },
  { role: 'tool', tool_call_id: `run-${i}`, content: output(i) },
];
const lastOf = (r: Recorded): Msg => (r.json!['messages'] as Msg[]).at(-1)!;

/** Asked to "recover", the model calls the recovery tool on the request's first receipt; otherwise it answers. */
const script = (r: Recorded): Reply => {
  const last = lastOf(r);
  if (last.role === 'user' && last.content === 'recover') return chat.calls([recoveryCall(r.json)]);
  return chat.text(last.role === 'tool' && last.tool_call_id === 'tt-1' ? 'recovered' : 'answer');
};

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('token-terminator proxy --workers 2', () => {
  it('answers on one port, replaces a worker killed with SIGKILL, keeps every receipt recoverable, and stops all on SIGTERM', async () => {
    const upstream = await startUpstream(script);
    const proxy = spawnProxy(
      ['--workers', '2', '--upstream', upstream.url, '--db', join(dir, 'vault.sqlite3'), '--quiet'],
      { PATH: process.env['PATH'] ?? '', HOME: dir, TOKEN_TERMINATOR_MAX_PAGE_CHARS: '200000' },
      'proxy --workers 2',
    );
    const ready = (): number[] =>
      [...proxy.stderr().matchAll(/"event":"worker_ready","pid":(\d+)/g)].map((m) => Number(m[1]));
    try {
      const url = await proxy.url;
      const workers = ready();
      expect(workers).toHaveLength(2);
      expect(new Set(workers).size).toBe(2);
      expect(proxy.stderr()).toContain('workers: 2');

      // Each request on a connection of its own (no pool), so the primary hands them to the workers in turn.
      const send = (i: number, messages: Msg[]): Promise<string> =>
        new Promise((done, fail) => {
          const req = request(
            `${url}/v1/chat/completions`,
            {
              method: 'POST',
              agent: false,
              headers: {
                'content-type': 'application/json',
                authorization: 'Bearer sk-workers',
                'x-token-terminator-session': `session-${i}`,
              },
            },
            (res) => {
              let text = '';
              res.setEncoding('utf8');
              res.on('data', (c: string) => (text += c));
              res.on('end', () => {
                if (res.statusCode !== 200) return fail(new Error(`status ${String(res.statusCode)}: ${text}`));
                done((JSON.parse(text) as { choices: { message: { content: string } }[] }).choices[0]!.message.content);
              });
            },
          );
          req.on('error', fail);
          req.end(JSON.stringify({ model: 'gpt-4o', messages }));
        });

      // Six sessions, each on a new connection (handed to the workers in turn): each gets a receipt.
      const sessions = [0, 1, 2, 3, 4, 5];
      for (const i of sessions) expect(await send(i, opening(i))).toBe('answer');
      const receipts = upstream.requests.map((r) => firstArtifact(r.json));
      expect(receipts.every((id) => id !== undefined)).toBe(true);
      expect(new Set(receipts).size).toBe(sessions.length);

      process.kill(workers[0]!, 'SIGKILL');
      // Once the primary has seen it go (a connection handed to the worker as it died is lost with
      // it, like its requests in flight), the other worker answers while the replacement starts.
      while (!proxy.stderr().includes('"event":"worker_exit"')) await new Promise((r) => setTimeout(r, 50));
      expect(await send(9, opening(9))).toBe('answer');
      while (ready().length < 3) await new Promise((r) => setTimeout(r, 100));
      const replacement = ready()[2]!;
      expect(workers).not.toContain(replacement);
      expect(alive(workers[0]!)).toBe(false);
      expect(proxy.stderr()).toMatch(/"event":"worker_exit","pid":\d+,"code":null,"signal":"SIGKILL"/);

      // Every receipt issued before the kill is recovered exactly, whichever worker answers now.
      const before = upstream.requests.length;
      for (const i of sessions) {
        const history: Msg[] = [
          ...opening(i),
          { role: 'assistant', content: 'answer' },
          { role: 'user', content: 'recover' },
        ];
        expect(await send(i, history)).toBe('recovered');
      }
      const continuations = upstream.requests.slice(before).filter((r) => lastOf(r).tool_call_id === 'tt-1');
      expect(continuations).toHaveLength(sessions.length);
      const recovered = continuations.map(
        (r) => (JSON.parse(lastOf(r).content ?? '{}') as { content?: string }).content ?? '',
      );
      expect(recovered.sort()).toEqual(sessions.map(output).sort());

      expect(await stopProcess(proxy.child)).toBe(0);
      for (const pid of [workers[1]!, replacement]) expect(alive(pid), `worker ${pid} stopped`).toBe(false);
    } finally {
      if (proxy.child.exitCode === null) proxy.child.kill('SIGKILL');
      for (const pid of ready()) if (alive(pid)) process.kill(pid, 'SIGKILL');
      await upstream.close();
    }
  }, 180_000);
});

describe('workerExecArgv', () => {
  const MiB = 2 ** 20;
  it("gives each worker a heap limit of half its share and a V8 helper-thread pool of its share of the cores, 1 to Node's 4", () => {
    const pool = (workers: number, cores: number): string | undefined =>
      workerExecArgv({ workers, cores, maxMemoryBytes: 448 * MiB }, [], '').find((a) =>
        a.startsWith('--v8-pool-size='),
      );
    expect(workerExecArgv({ workers: 2, cores: 2, maxMemoryBytes: 448 * MiB }, ['--enable-source-maps'], '')).toEqual([
      '--enable-source-maps',
      '--max-old-space-size=224',
      '--v8-pool-size=1',
      '--single-threaded-gc',
    ]);
    expect(pool(1, 2)).toBe('--v8-pool-size=2');
    expect(pool(3, 2)).toBe('--v8-pool-size=1');
    expect(pool(2, 8)).toBe('--v8-pool-size=4');
    expect(pool(1, 64)).toBe('--v8-pool-size=4');
  });

  it('collects on the worker thread alone when a worker has less than two cores', () => {
    const singleGc = (workers: number, cores: number): boolean =>
      workerExecArgv({ workers, cores, maxMemoryBytes: 448 * MiB }, [], '').includes('--single-threaded-gc');
    expect(singleGc(1, 1)).toBe(true);
    expect(singleGc(1, 2)).toBe(false);
    expect(singleGc(2, 2)).toBe(true);
    expect(singleGc(2, 3)).toBe(true);
    expect(singleGc(2, 4)).toBe(false);
    expect(singleGc(3, 2)).toBe(true);
    expect(singleGc(4, 16)).toBe(false);
  });

  it('leaves the collector threaded when Node was given a pool size or a threading flag', () => {
    const options = { workers: 2, cores: 2, maxMemoryBytes: 448 * MiB };
    expect(workerExecArgv(options, ['--v8-pool-size=2'], '')).not.toContain('--single-threaded-gc');
    expect(workerExecArgv(options, [], '--v8-pool-size=2')).not.toContain('--single-threaded-gc');
    expect(workerExecArgv(options, ['--no-single-threaded-gc'], '')).not.toContain('--single-threaded-gc');
    expect(workerExecArgv(options, ['--single-threaded'], '')).toEqual([
      '--single-threaded',
      '--max-old-space-size=224',
      '--v8-pool-size=1',
    ]);
  });

  it('leaves a heap limit or pool size Node was given, in its arguments or NODE_OPTIONS', () => {
    const options = { workers: 2, cores: 2, maxMemoryBytes: 448 * MiB };
    expect(workerExecArgv(options, ['--v8-pool-size=3'], '--max-old-space-size=100')).toEqual(['--v8-pool-size=3']);
    expect(workerExecArgv(options, ['--max-old-space-size=100'], '--v8-pool-size=2')).toEqual([
      '--max-old-space-size=100',
    ]);
  });
});

describe('token-terminator proxy --workers 1', () => {
  // /proc shows a process's arguments and environment (Linux only).
  it.runIf(process.platform === 'linux')(
    'serves from one forked worker that starts with the heap limit, helper threads and malloc setting of its share',
    async () => {
      const upstream = await startUpstream(() => chat.text('pong'));
      const MiB = 2 ** 20;
      const proxy = spawnProxy(
        ['--workers', '1', '--max-memory-bytes', String(640 * MiB), '--upstream', upstream.url],
        { PATH: process.env['PATH'] ?? '', HOME: dir, TOKEN_TERMINATOR_DB_PATH: join(dir, 'one.sqlite3') },
        'proxy --workers 1',
      );
      let worker: number | undefined;
      try {
        const url = await proxy.url;
        worker = Number(/"event":"worker_ready","pid":(\d+)/.exec(proxy.stderr())?.[1]);
        expect(worker).toBeGreaterThan(0);
        expect(worker).not.toBe(proxy.child.pid);
        expect(proxy.stderr()).toContain('workers: 1');
        // Its share: 640 MiB less the primary's 128 MiB; its heap limit half of that.
        const argv = readFileSync(`/proc/${worker}/cmdline`, 'utf8').split('\0');
        expect(argv).toContain('--max-old-space-size=256');
        expect(argv).toContain(`--v8-pool-size=${Math.min(4, availableParallelism())}`);
        // One worker with two cores or more keeps V8's collector threads.
        expect(argv.includes('--single-threaded-gc')).toBe(availableParallelism() < 2);
        expect(readFileSync(`/proc/${worker}/environ`, 'utf8').split('\0')).toContain('MALLOC_MMAP_THRESHOLD_=131072');
        const reply = await fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: 'Bearer sk-one' },
          body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'ping' }] }),
        });
        expect(reply.status).toBe(200);
        expect(await stopProcess(proxy.child)).toBe(0);
        expect(alive(worker)).toBe(false);
      } finally {
        if (proxy.child.exitCode === null) proxy.child.kill('SIGKILL');
        if (worker !== undefined && worker > 0 && alive(worker)) process.kill(worker, 'SIGKILL');
        await upstream.close();
      }
    },
    120_000,
  );

  it('refuses a total that leaves its one worker under 256 MiB, naming the flag', async () => {
    const proxy = spawnProxy(
      ['--workers', '1', '--max-memory-bytes', String(300 * 2 ** 20)],
      { PATH: process.env['PATH'] ?? '', HOME: dir },
      'proxy --workers 1 (too small)',
    );
    await expect(proxy.url).rejects.toThrow();
    expect(proxy.child.exitCode ?? (await new Promise((r) => proxy.child.once('exit', r)))).toBe(2);
    expect(proxy.stderr()).toContain('leaves the worker under 268435456; raise it to at least 402653184');
  }, 60_000);
});
