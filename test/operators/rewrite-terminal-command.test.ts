import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { firstValueFrom, from, map, Subject, toArray, type Subscription } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import {
  rewriteTerminalCommand,
  type RewriteTerminalCommandOptions,
} from '../../operators/rewrite-terminal-command.js';
import { createStep, type Step, type ToolCall } from '../../src/step.js';
import { assertInvariant, deepFreeze, invariants, toolCallStream } from '../../src/testing/index.js';
import { createVault } from '../../src/vault/index.js';
import { resolveRtkPath } from '../../src/tools/spawner.js';

const STUB = join(dirname(fileURLToPath(import.meta.url)), '../fixtures/rtk/rtk');
const work = mkdtempSync(join(tmpdir(), 'tt-rtk-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

let log: string;
let n = 0;
beforeEach(() => {
  log = join(work, `log-${(n += 1)}.txt`);
});
const calls = (): string[] =>
  existsSync(log)
    ? readFileSync(log, 'utf8')
        .trim()
        .split('\n')
        .filter((l) => l !== '')
    : [];

const call = (command: string, extra: Record<string, unknown> = {}, name = 'terminal'): ToolCall =>
  deepFreeze({ id: `c-${command}`, name, args: { command, cwd: work, ...extra } });
const stepOf = (c: ToolCall): Step<ToolCall> => createStep(c, { sessionId: 's', cwd: work });

function run(calls: readonly ToolCall[], options: RewriteTerminalCommandOptions = {}): Promise<Step<ToolCall>[]> {
  const op = rewriteTerminalCommand({ rtkPath: STUB, env: { PATH: '' }, timeoutMs: 5000, ...options });
  return firstValueFrom(from(calls.map(stepOf)).pipe(op, toArray()));
}
// The stub inherits process.env; point its log at the current file.
const withLog = <T>(fn: () => Promise<T>): Promise<T> => {
  process.env['RTK_STUB_LOG'] = log;
  return fn().finally(() => delete process.env['RTK_STUB_LOG']);
};
const commandOf = (s: Step<ToolCall>): unknown => s.value.args['command'];
const reasons = (s: Step<ToolCall>): string[] => s.decisions.map((d) => `${d.kind}:${d.reason}`);

function gone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}
async function waitGone(pid: number): Promise<boolean> {
  for (let i = 0; i < 200 && !gone(pid); i += 1) await new Promise((r) => setTimeout(r, 10));
  return gone(pid);
}

describe('rewriteTerminalCommand (unit, stub rtk)', () => {
  it('rewrites Codex CLI exec_command in its own `cmd` field and leaves an argv `shell` call as it is', async () => {
    const exec = deepFreeze({ id: 'c-exec', name: 'exec_command', args: { cmd: 'git status', workdir: work } });
    const argv = deepFreeze({ id: 'c-shell', name: 'shell', args: { command: ['bash', '-lc', 'git status'] } });
    const [a, b] = await run([exec, argv]);
    expect(a!.value.args).toEqual({ cmd: 'rtk git status', workdir: work });
    expect(b!.value).toBe(argv);
  });

  it('rewrites through exit 3 without mutating the caller, keeping other args', async () => {
    const c = call('git status', { timeout: 30 });
    const [out] = await run([c]);
    expect(commandOf(out!)).toBe('rtk git status');
    expect(out!.value.args['timeout']).toBe(30);
    expect(c.args['command']).toBe('git status');
    expect(out!.original).toBe(c);
    expect(reasons(out!)).toEqual(['applied:rewritten']);
  });

  it('accepts exit 0 too', async () => {
    const [out] = await run([call('git log stub-exit0')]);
    expect(commandOf(out!)).toBe('rtk git log stub-exit0');
  });

  it.each([
    ['ls stub-exit1', 'no_rewrite'],
    ['ls stub-exit2', 'no_rewrite'],
    ['ls stub-same', 'no_rewrite'],
    ['ls stub-empty', 'no_rewrite'],
  ])('passes %s through unchanged as a documented no-rewrite answer (%s)', async (command, reason) => {
    const [out] = await run([call(command)]);
    expect(commandOf(out!)).toBe(command);
    expect(reasons(out!)).toEqual([`skipped:${reason}`]);
  });

  it.each([
    ['ls stub-exit7', 'exit_code', 'E_RTK_EXIT_CODE'],
    ['ls stub-garbage', 'invalid_output', 'E_RTK_INVALID_OUTPUT'],
    ['ls stub-crash', 'signal', 'E_RTK_SIGNAL'],
  ])('fails open on a fault: %s passes through unchanged (failed_open %s)', async (command, reason, code) => {
    const [out] = await run([call(command)]);
    expect(commandOf(out!)).toBe(command);
    expect(out!.value).toBe(out!.original);
    expect(out!.decisions).toEqual([
      { stage: 'rewriteTerminalCommand', kind: 'failed_open', reason, error: `RtkFaultError:${code}` },
    ]);
  });

  it('fails open when the pinned rtk binary does not exist (spawn)', async () => {
    const [out, next] = await run([call('git status'), call('git log')], { rtkPath: join(work, 'no-such-rtk') });
    expect(commandOf(out!)).toBe('git status');
    expect(out!.decisions).toEqual([
      { stage: 'rewriteTerminalCommand', kind: 'failed_open', reason: 'spawn', error: 'RtkFaultError:E_RTK_SPAWN' },
    ]);
    expect(reasons(next!)).toEqual(['failed_open:spawn']);
  });

  it('caches positive and negative results per (cwd, command), not timeouts or crashes', async () => {
    await withLog(async () => {
      const other = join(work, 'sub');
      mkdirSync(other, { recursive: true });
      const out = await run([
        call('git status'),
        call('git status'),
        call('ls stub-exit1'),
        call('ls stub-exit1'),
        call('git status', { cwd: other }),
        call('ls stub-crash'),
        call('ls stub-crash'),
      ]);
      expect(out.map(commandOf).slice(0, 2)).toEqual(['rtk git status', 'rtk git status']);
      expect(calls().map((l) => l.split(' ').slice(2).join(' '))).toEqual([
        'git status',
        'ls stub-exit1',
        'git status',
        'ls stub-crash',
        'ls stub-crash',
      ]);
    });
  });

  it('expires cache entries after the TTL and evicts the least recently used', async () => {
    await withLog(async () => {
      let now = 0;
      const op = rewriteTerminalCommand({
        rtkPath: STUB,
        env: { PATH: '' },
        timeoutMs: 5000,
        cacheTtlMs: 10_000,
        cacheSize: 2,
        clock: () => now,
      });
      const input = new Subject<Step<ToolCall>>();
      const outputs: Step<ToolCall>[] = [];
      input.pipe(op).subscribe((s) => outputs.push(s));
      const push = async (command: string): Promise<void> => {
        const before = outputs.length;
        input.next(stepOf(call(command)));
        while (outputs.length === before) await new Promise((r) => setTimeout(r, 5));
      };
      await push('git a');
      await push('git a'); // hit
      now = 20_000;
      await push('git a'); // expired → spawn
      await push('git b');
      await push('git c'); // evicts git a
      await push('git a'); // spawn again
      expect(calls().map((l) => l.split(' ').slice(2).join(' '))).toEqual([
        'git a',
        'git a',
        'git b',
        'git c',
        'git a',
      ]);
      input.complete();
    });
  });

  it('lets a hung rtk hit the deadline: the original passes and the child is reaped', async () => {
    const pids: number[] = [];
    // The deadline is generous (the hung stub sleeps 600 s): the answering stub must beat it even
    // on a loaded machine, where a 150 ms deadline once timed out the healthy call too.
    const [out, next] = await run([call('git diff stub-hang'), call('git status')], {
      timeoutMs: 2000,
      onSpawn: (pid) => pids.push(pid),
    });
    expect(commandOf(out!)).toBe('git diff stub-hang');
    expect(out!.decisions).toEqual([
      { stage: 'rewriteTerminalCommand', kind: 'failed_open', reason: 'timeout', error: 'RtkFaultError:E_RTK_TIMEOUT' },
    ]);
    expect(commandOf(next!)).toBe('rtk git status');
    expect(await waitGone(pids[0]!)).toBe(true);
  });

  it('kills and reaps the child when the subscriber unsubscribes mid-rewrite', async () => {
    let pid: number | undefined;
    const op = rewriteTerminalCommand({
      rtkPath: STUB,
      env: { PATH: '' },
      timeoutMs: 60_000,
      onSpawn: (p) => (pid = p),
    });
    const seen: Step<ToolCall>[] = [];
    const sub: Subscription = from([stepOf(call('git diff stub-hang'))])
      .pipe(op)
      .subscribe((s) => seen.push(s));
    for (let i = 0; i < 500 && pid === undefined; i += 1) await new Promise((r) => setTimeout(r, 10));
    expect(pid).toBeDefined();
    expect(gone(pid!)).toBe(false);
    sub.unsubscribe();
    expect(await waitGone(pid!)).toBe(true);
    expect(seen).toEqual([]);
  });

  it('keeps order when an early rewrite is slower than later ones', async () => {
    const commands = ['git diff stub-hang', 'git status', 'echo hi', 'cargo test'];
    const out = await run(
      commands.map((c) => call(c)),
      { timeoutMs: 2000 }, // only the hung stub may hit it (see above)
    );
    expect(out.map(commandOf)).toEqual(['git diff stub-hang', 'rtk git status', 'echo hi', 'rtk cargo test']);
  });

  it('skips already-rtk commands, excluded prefixes, disallowed backends', async () => {
    await withLog(async () => {
      const out = await run(
        [
          call('rtk git status'),
          call(': RTK && rtk ls'),
          call('  GIT push origin'),
          call('git status', { env_type: 'docker' }),
          call('docker exec x ls'),
        ],
        { exclude: ['git push', 'Docker exec'] },
      );
      expect(out.map(commandOf)).toEqual([
        'rtk git status',
        ': RTK && rtk ls',
        '  GIT push origin',
        'git status',
        'docker exec x ls',
      ]);
      expect(out.map((s) => reasons(s)[0])).toEqual([
        'skipped:already_rtk',
        'skipped:already_rtk',
        'skipped:excluded',
        'skipped:backend',
        'skipped:excluded',
      ]);
      expect(calls()).toEqual([]);
      const [ssh] = await run([call('git status', { backend: 'ssh' })], { backends: ['all'] });
      expect(commandOf(ssh!)).toBe('rtk git status');
    });
  });

  it('reads TERMINAL_ENV when the call names no backend', async () => {
    const [out] = await run([call('git status')], { env: { PATH: '', TERMINAL_ENV: 'ssh' } });
    expect(reasons(out!)).toEqual(['skipped:backend']);
  });

  it('adds the preview marker when asked', async () => {
    const [out] = await run([call('git status')], { previewMarker: true });
    expect(commandOf(out!)).toBe(': RTK && rtk git status');
  });

  it('maps host tool names; other tools are untouched', async () => {
    const out = await run(
      [call('git status', {}, 'bash'), call('git status', {}, 'Shell_Exec'), call('git status', {}, 'read_file')],
      { toolNames: { Shell_Exec: 'terminal' } },
    );
    expect(out.map(commandOf)).toEqual(['rtk git status', 'rtk git status', 'git status']);
  });

  it('measures only in suggest mode and never spawns in native or off mode', async () => {
    await withLog(async () => {
      const [suggested] = await run([call('git status')], { mode: 'suggest' });
      expect(commandOf(suggested!)).toBe('git status');
      expect(reasons(suggested!)).toEqual(['measured:suggested']);
      expect(calls()).toHaveLength(1);
      for (const mode of ['native', 'off'] as const) {
        const [out] = await run([call('git status')], { mode });
        expect(commandOf(out!)).toBe('git status');
        expect(out!.decisions).toEqual([]);
      }
      expect(calls()).toHaveLength(1);
    });
  });

  it('prefers a pinned rtk path over PATH, and finds rtk on PATH otherwise', async () => {
    const bin = join(work, 'bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'rtk'), '#!/bin/sh\nprintf "rtk from-path"\nexit 3\n');
    chmodSync(join(bin, 'rtk'), 0o755);
    expect(resolveRtkPath(STUB, { PATH: bin })).toBe(STUB);
    expect(resolveRtkPath(undefined, { PATH: `relative:${bin}` })).toBe(join(bin, 'rtk'));
    const [pinned] = await run([call('git status')], { env: { PATH: bin } });
    expect(commandOf(pinned!)).toBe('rtk git status');
    const op = rewriteTerminalCommand({ env: { PATH: bin }, timeoutMs: 5000 });
    const [fromPath] = await firstValueFrom(from([stepOf(call('git status'))]).pipe(op, toArray()));
    expect(commandOf(fromPath!)).toBe('rtk from-path');
    const none = rewriteTerminalCommand({ env: { PATH: join(work, 'nowhere') }, timeoutMs: 5000 });
    const [missing] = await firstValueFrom(from([stepOf(call('git status'))]).pipe(none, toArray()));
    expect(reasons(missing!)).toEqual(['skipped:rtk_unavailable']);
  });

  describe('pytest double-quiet guard', () => {
    const project = (files: Record<string, string>): string => {
      const dir = mkdtempSync(join(work, 'py-'));
      mkdirSync(join(dir, '.git'));
      for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
      mkdirSync(join(dir, 'tests'));
      return dir;
    };
    it.each([
      ['pyproject.toml', '[tool.pytest.ini_options]\naddopts = "-q --tb=short"\n', true],
      ['pyproject.toml', '[tool.pytest.ini_options]\naddopts = ["-x", "--quiet"]\n', true],
      ['pyproject.toml', '[tool.pytest.ini_options]\naddopts = "-x"\n', false],
      ['pytest.ini', '[pytest]\naddopts = --quiet\n', true],
      ['tox.ini', '[tox]\nenvlist = py3\n[pytest]\naddopts =\n  -qq\n', true],
      ['setup.cfg', '[tool:pytest]\naddopts = --quiet\n', true],
      ['setup.cfg', '[metadata]\nname = x\n', false],
    ])('%s with %j → skipped=%s (detected from a child directory)', async (file, text, skipped) => {
      const dir = project({ [file]: text });
      const out = await run(
        ['pytest', 'python3 -m pytest tests', 'uv run pytest -x', 'cd x && python3.12 -m pytest'].map((c) =>
          call(c, { cwd: join(dir, 'tests') }),
        ),
      );
      for (const s of out) expect(reasons(s)[0] === 'skipped:pytest_quiet_config').toBe(skipped);
    });

    it('reads the config once per directory', async () => {
      const dir = project({ 'pyproject.toml': '[tool.pytest.ini_options]\naddopts = "-q"\n' });
      const reads: string[] = [];
      const readFile = (p: string): string | undefined => {
        reads.push(p);
        try {
          return readFileSync(p, 'utf8');
        } catch {
          return undefined;
        }
      };
      await run([call('pytest', { cwd: dir }), call('pytest -k a', { cwd: dir }), call('pytest tests', { cwd: dir })], {
        readFile,
      });
      expect(reads.filter((p) => p.endsWith('pyproject.toml'))).toHaveLength(1);
    });

    it('can be switched off', async () => {
      const dir = project({ 'pytest.ini': '[pytest]\naddopts = -q\n' });
      const [out] = await run([call('pytest', { cwd: dir })], { pytestGuard: false });
      expect(commandOf(out!)).toBe('rtk pytest');
    });
  });

  it('emits skipped steps synchronously in marble order', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ cold, expectObservable }) => {
      const steps = {
        a: stepOf(call('git status', {}, 'read_file')),
        b: stepOf(call('rtk ls')),
        c: stepOf(call('git push', {})),
      };
      const op = rewriteTerminalCommand({ rtkPath: STUB, env: { PATH: '' }, exclude: ['git push'] });
      expectObservable(
        cold('a-b-c|', steps).pipe(
          op,
          map((s) => `${String(commandOf(s))}|${reasons(s).join(',')}`),
        ),
      ).toBe('a-b-c|', {
        a: 'git status|',
        b: 'rtk ls|skipped:already_rtk',
        c: 'git push|skipped:excluded',
      });
    });
  });

  it('rejects bad options at build time, naming the operator', () => {
    expect(() => rewriteTerminalCommand({ timeoutMs: 10 })).toThrow(/rewriteTerminalCommand: options\.timeoutMs/);
    expect(() => rewriteTerminalCommand({ cacheSize: 0 })).toThrow(/rewriteTerminalCommand: options\.cacheSize/);
    expect(() => rewriteTerminalCommand({ mode: 'fast' as never })).toThrow(/rewriteTerminalCommand: options\.mode/);
    expect(() => rewriteTerminalCommand({ toolNames: { bash: 'shell' } })).toThrow(
      /rewriteTerminalCommand: options\.toolNames/,
    );
    expect(() => rewriteTerminalCommand({ exclude: 'git push' as never })).toThrow(
      /rewriteTerminalCommand: options\.exclude/,
    );
  });

  // Commands made of words the stub reacts to (and ones it does not), drawn into the kit's terminal
  // calls; a no-rewrite answer, garbage and an exact echo all have to leave the command alone.
  const word = fc.constantFrom(
    'git',
    'status',
    'ls',
    'stub-exit1',
    'stub-exit2',
    'stub-garbage',
    'stub-same',
    'echo',
    'rtk',
    'pytest',
    '-la',
    '"a b"',
  );
  const commandSet = fc.uniqueArray(
    fc.array(word, { minLength: 1, maxLength: 4 }).map((w) => w.join(' ')),
    { minLength: 1, maxLength: 6 },
  );
  const terminalCalls = commandSet.chain((commands) =>
    toolCallStream({ tools: ['terminal'], commands, cwds: [work], minLength: 1, maxLength: 4 }),
  );

  it('leaves a command untouched or wraps it exactly in rtk, keeping every other arg and the original', async () => {
    await fc.assert(
      fc.asyncProperty(terminalCalls, async (generated) => {
        const input = generated.map((c) => deepFreeze(structuredClone(c)));
        const out = await run(input, { exclude: ['git push'] });
        expect(out).toHaveLength(input.length);
        out.forEach((s, i) => {
          const before = String(input[i]!.args['command']);
          const after = commandOf(s);
          expect(after === before || after === `rtk ${before.trim()}`).toBe(true);
          expect({ ...s.value.args, command: before }).toEqual(input[i]!.args);
          expect(s.original).toBe(input[i]);
          expect(s.decisions.some((d) => d.kind === 'failed_open' && (d.error ?? '').startsWith('TypeError'))).toBe(
            false,
          );
        });
      }),
      { numRuns: 15 },
    );
  });

  it('never mutates caller objects (the kit invariant, plain and deep-frozen calls)', async () => {
    await using vault = await createVault({ path: ':memory:' });
    const op = rewriteTerminalCommand({ rtkPath: STUB, env: { PATH: '' }, timeoutMs: 5000, exclude: ['git push'] });
    await assertInvariant(invariants.neverMutates(op, { vault, inputs: terminalCalls, context: { cwd: work } }), {
      numRuns: 15,
    });
  });
});

const realRtk = (() => {
  try {
    const path = resolveRtkPath(undefined, process.env);
    if (path === undefined) return undefined;
    return /rtk/.test(execFileSync(path, ['--version'], { encoding: 'utf8', timeout: 2000 })) &&
      execFileSync(path, ['gain', '--help'], {
        encoding: 'utf8',
        timeout: 2000,
        stdio: ['ignore', 'pipe', 'ignore'],
      }) !== undefined
      ? path
      : undefined;
  } catch {
    return undefined;
  }
})();

describe('rewriteTerminalCommand (integration, real rtk)', () => {
  it.skipIf(realRtk === undefined)('rewrites git status with the real rtk binary', async () => {
    const op = rewriteTerminalCommand({ timeoutMs: 5000 });
    const [out] = await firstValueFrom(from([stepOf(call('git status'))]).pipe(op, toArray()));
    expect(commandOf(out!)).toBe('rtk git status');
  });
});
