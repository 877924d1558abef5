import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { firstValueFrom, from, toArray } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { createTiktokenCounter } from '../../src/measure/index.js';
import type { OpenStage, StepReducer } from '../../src/operator-kit.js';
import { fallbackPressure } from '../../src/budget/pressure.js';
import { createTerminator, modeGates } from '../../src/runtime/index.js';
import { Calls } from '../../src/runtime/calls.js';
import { SessionCache } from '../../src/session/session-cache.js';
import { advance, createStep, type Step } from '../../src/step.js';
import { createVault } from '../../src/vault/index.js';
import { VaultOpenError } from '../../src/vault/errors.js';
import { ConfigError } from '../../src/errors.js';
import { readMetricsSummary } from '../support/metrics-summary.js';
import { referencedArtifacts } from '../../src/receipts/index.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tt-runtime-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const ctx = { sessionId: 's1' };
const env = {};

/** A stage of strings from a reducer of (step, signal), as one run. */
const open = (reduce: StepReducer<string>): OpenStage<string> => ({
  reduce: (step, _session, signal) => reduce(step, signal),
});

describe('Calls', () => {
  it('keeps session state across calls of one session', async () => {
    const calls = new Calls(new SessionCache(4));
    const counting: OpenStage<string> = {
      reduce: (s, session) =>
        advance(s, `${s.value}#${++session.seenItems}`, { stage: 'count', kind: 'applied', reason: 'test' }),
    };
    const a = await calls.run('request', counting, createStep('a', ctx));
    const b = await calls.run('request', counting, createStep('b', ctx));
    const other = await calls.run('request', counting, createStep('c', { sessionId: 's2' }));
    expect([a.value, b.value, other.value]).toEqual(['a#1', 'b#2', 'c#1']);
  });

  it('runs the calls of one session and kind in turn, each answered with its own output', async () => {
    const delays: Record<string, number> = { a: 20, b: 1, c: 5 };
    const order: string[] = [];
    const slow = open(async (s) => {
      order.push(`start ${s.value}`);
      await new Promise((r) => setTimeout(r, delays[s.value]));
      order.push(`end ${s.value}`);
      return advance(s, s.value.toUpperCase(), { stage: 'slow', kind: 'applied', reason: 'test' });
    });
    const calls = new Calls(new SessionCache(4));
    const out = await Promise.all(['a', 'b', 'c'].map((v) => calls.run('request', slow, createStep(v, ctx))));
    expect(out.map((s) => s.value)).toEqual(['A', 'B', 'C']);
    expect(order).toEqual(['start a', 'end a', 'start b', 'end b', 'start c', 'end c']);
  });

  it('resolves an aborted call at once with its input and keeps later calls paired', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    let sawAbort = false;
    const blocking = open(async (s, signal) => {
      if (s.value === 'first') {
        signal.addEventListener('abort', () => (sawAbort = true));
        await gate;
      }
      return advance(s, `${s.value}!`, { stage: 'block', kind: 'applied', reason: 'test' });
    });
    const calls = new Calls(new SessionCache(4));
    const controller = new AbortController();
    const first = calls.run('request', blocking, createStep('first', ctx, controller.signal));
    const second = calls.run('request', blocking, createStep('second', ctx));
    controller.abort();
    const aborted = await first;
    expect(aborted.value).toBe('first');
    expect(aborted.decisions.at(-1)).toMatchObject({ kind: 'skipped', reason: 'aborted' });
    expect(sawAbort).toBe(true);
    release();
    expect((await second).value).toBe('second!');
  });

  it('fails open when a stage throws, and the next call runs', async () => {
    const breaking = open((s) => {
      if (s.value === 'bad') throw new RangeError('boom');
      return undefined;
    });
    const calls = new Calls(new SessionCache(4));
    const bad = await calls.run('request', breaking, createStep('bad', ctx));
    expect(bad.value).toBe('bad');
    expect(bad.decisions.at(-1)).toMatchObject({ kind: 'failed_open', error: 'RangeError' });
    expect((await calls.run('request', breaking, createStep('good', ctx))).value).toBe('good');
  });

  it('answers the calls in flight and after close with their input', async () => {
    const calls = new Calls(new SessionCache(4));
    let cancelled = false;
    const hanging = open(
      (s, signal) =>
        new Promise<Step<string>>(() => {
          signal.addEventListener('abort', () => (cancelled = true));
        }),
    );
    const inFlight = calls.run('request', hanging, createStep('x', ctx));
    await new Promise((r) => setImmediate(r));
    calls.close();
    expect((await inFlight).decisions.at(-1)).toMatchObject({ kind: 'skipped', reason: 'runtime closed' });
    expect(cancelled).toBe(true);
    const out = await calls.run('request', hanging, createStep('y', ctx));
    expect(out.value).toBe('y');
    expect(out.decisions.at(-1)).toMatchObject({ kind: 'skipped', reason: 'runtime closed' });
  });
});

describe('modeGates', () => {
  it('follows the modes table', () => {
    const g = (mode: 'balanced' | 'aggressive' | 'native' | 'terminal' | 'suggest' | 'off') =>
      modeGates({ enabled: true, mode, temporalDelta: true, tokenBudget: true, outputCap: true });
    expect(g('balanced')).toMatchObject({ terminal: true, native: true, compiler: true, temporal: true, budget: true });
    expect(g('native')).toMatchObject({ terminal: false, native: true, compiler: false, budget: false });
    expect(g('terminal')).toMatchObject({ terminal: true, native: false, compiler: false });
    expect(g('suggest')).toMatchObject({ terminal: false, suggest: true, native: false });
    expect(g('off')).toMatchObject({ terminal: false, native: false, compiler: false, budget: false });
    expect(
      modeGates({ enabled: false, mode: 'balanced', temporalDelta: true, tokenBudget: true, outputCap: true }).compiler,
    ).toBe(false);
    // TOKEN_BUDGET is the token half of acceptance, OUTPUT_CAP the cap stage: independent switches.
    expect(
      modeGates({ enabled: true, mode: 'balanced', temporalDelta: true, tokenBudget: false, outputCap: true }),
    ).toMatchObject({ budget: true, tokenGate: false });
    expect(
      modeGates({ enabled: true, mode: 'balanced', temporalDelta: true, tokenBudget: true, outputCap: false }),
    ).toMatchObject({ budget: false, tokenGate: true });
  });
});

describe('createTerminator', () => {
  it('opens the configured vault, passes everything through in mode off, and closes what it opened', async () => {
    const tt = await createTerminator({ env, overrides: { dbPath: join(dir, 'v.sqlite3'), mode: 'off' } });
    expect(tt.vault.path).toBe(join(dir, 'v.sqlite3'));
    const request = Object.freeze({
      model: 'gpt-4o',
      messages: Object.freeze([Object.freeze({ role: 'user', content: 'hi' })]),
    });
    const step = await tt.reduceRequest(request, ctx);
    expect(step.value).toBe(request);
    const result = { callId: 'c1', name: 'terminal', args: {}, content: 'x'.repeat(50_000) };
    expect((await tt.reduceToolResult(result, ctx)).value).toBe(result);
    await tt.close();
    await tt.close();
    await expect(tt.vault.usage()).rejects.toThrow();
  });

  it('leaves a vault it was given open', async () => {
    const vault = await createVault({ path: join(dir, 'given.sqlite3') });
    const counter = createTiktokenCounter();
    {
      await using tt = await createTerminator({
        env,
        overrides: { dbPath: join(dir, 'unused.sqlite3') },
        vault,
        counter,
      });
      expect(tt.vault).toBe(vault);
      expect(tt.counter).toBe(counter);
    }
    await expect(vault.usage()).resolves.toMatchObject({ artifacts: 0 });
    expect(counter.count('hello world')).toBe(2);
    counter.dispose?.();
    await vault.close();
  });

  it('resolves an already-aborted call with its input', async () => {
    await using tt = await createTerminator({ env, overrides: { dbPath: join(dir, 'v.sqlite3') } });
    const controller = new AbortController();
    controller.abort();
    const request = { messages: [{ role: 'user', content: 'x'.repeat(20_000) }] };
    const step = await tt.reduceRequest(request, ctx, controller.signal);
    expect(step.value).toBe(request);
  });

  it('passes a malformed tool result (null) through without throwing (metrics recorded by default)', async () => {
    await using tt = await createTerminator({ env, overrides: { dbPath: join(dir, 'v.sqlite3') } });
    const step = await tt.reduceToolResult(null as never, ctx);
    expect(step.value).toBeNull();
  });

  it('offers the recovery tool over its vault', async () => {
    await using tt = await createTerminator({ env, overrides: { dbPath: join(dir, 'v.sqlite3') } });
    const put = await tt.vault.put({ content: 'evidence '.repeat(100), toolName: 'terminal', sessionId: 's1' });
    const page = JSON.parse(
      await tt.recoveryTool.handle({ action: 'artifact_get', artifact_id: put.artifactId }, ctx),
    ) as { content: string };
    expect(page.content).toBe('evidence '.repeat(100));
  });
});

describe('fallbackPressure', () => {
  it('is P + R − 1 with R the smaller of the reserve and the route cap', () => {
    const config = loadConfig({ env, overrides: { dbPath: ':memory:' } });
    const counter = { name: 'fixed', exact: true, count: () => 1000 };
    expect(fallbackPressure(config, counter, {}, ctx)).toBe(1000 + config.incontext.minOutputTokens - 1);
    expect(fallbackPressure(config, counter, {}, { sessionId: 's', route: { outputCap: 100 } })).toBe(1000 + 100 - 1);
  });
});

describe('createTerminator pipelines (balanced)', () => {
  it('keeps request-stream state across facade calls: the second exposure of a large output is a receipt that recovers', async () => {
    await using tt = await createTerminator({
      env,
      overrides: { dbPath: join(dir, 'v.sqlite3'), historyPolicy: 'lazy' },
    });
    const big = Array.from({ length: 2000 }, (_, i) => `diagnostic line ${i}: state`).join('\n');
    const messages = [
      { role: 'user', content: 'inspect' },
      {
        role: 'assistant',
        content: '',
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'terminal', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'c1', content: big },
    ];
    const first = await tt.reduceRequest({ model: 'gpt-4o', messages }, { sessionId: 's', requestId: 'r1' });
    const second = await tt.reduceRequest(
      {
        model: 'gpt-4o',
        messages: [...messages, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'next' }],
      },
      { sessionId: 's', requestId: 'r2' },
    );
    const text = (step: typeof first): string => JSON.stringify(step.value['messages']);
    expect(text(first)).toContain('diagnostic line 1999');
    expect(text(second)).not.toContain('diagnostic line 1999');
    const tool = (second.value['messages'] as { role: string; content: string }[]).find((m) => m.role === 'tool')!;
    const [id] = referencedArtifacts(tool.content);
    let content = '';
    let offset: number | null = 0;
    while (offset !== null) {
      const page = JSON.parse(
        await tt.recoveryTool.handle(
          { action: 'artifact_get', artifact_id: id, offset, limit: 20000 },
          { sessionId: 's' },
        ),
      ) as { content: string; next_offset: number | null };
      content += page.content;
      offset = page.next_offset;
    }
    expect(content).toBe(big);
  });

  it("the tool stage's views keep the lines naming what the session's latest request is about (its task, the agent's words)", async () => {
    await using tt = await createTerminator({ env, overrides: { dbPath: join(dir, 'v.sqlite3') } });
    const raw = readFileSync(join(import.meta.dirname, '../fixtures/terminal/find.txt'), 'utf8');
    const wanted = 'src/internal/operators/mergeMap.ts';
    const call = { callId: 'c1', name: 'terminal', args: { command: 'find src -type f' }, content: raw };
    // No request of this session yet: nothing to focus on.
    expect((await tt.reduceToolResult(call, { sessionId: 'other' })).value.content).not.toContain(wanted);
    const messages = [
      { role: 'system', content: 'You are a coding agent.' },
      { role: 'user', content: 'The `mergeMap` operator drops inner errors; fix it.' },
      {
        role: 'assistant',
        content: 'Let me list the sources.',
        tool_calls: [{ id: 'c0', type: 'function', function: { name: 'terminal', arguments: '{"command":"ls"}' } }],
      },
      { role: 'tool', tool_call_id: 'c0', content: 'src' },
    ];
    await tt.reduceRequest({ model: 'gpt-4o', messages }, { sessionId: 's', requestId: 'r1' });
    const reduced = await tt.reduceToolResult(call, { sessionId: 's' });
    expect(reduced.value.content).toContain(`\n${wanted}\n`);
    expect(reduced.value.content.length).toBeLessThan(raw.length);
  });

  it('records one content-free metrics row per compiled request', async () => {
    const path = join(dir, 'm.sqlite3');
    {
      await using tt = await createTerminator({ env, overrides: { dbPath: path } });
      await tt.reduceRequest(
        { model: 'gpt-4o', messages: [{ role: 'user', content: 'hello' }] },
        { sessionId: 's', requestId: 'a' },
      );
      await tt.reduceRequest(
        { model: 'gpt-4o', messages: [{ role: 'user', content: 'hello again' }] },
        { sessionId: 's', requestId: 'b' },
      );
    }
    const summary = readMetricsSummary(path);
    expect(summary.requests).toBe(2);
    expect(summary.components['current_user']?.raw_tokens).toBeGreaterThan(0);
    const off = join(dir, 'n.sqlite3');
    {
      await using tt = await createTerminator({ env, overrides: { dbPath: off }, metrics: false });
      await tt.reduceRequest({ messages: [{ role: 'user', content: 'hello' }] }, { sessionId: 's', requestId: 'a' });
    }
    expect(readMetricsSummary(off).requests).toBe(0);
  });

  it('routes a terminal call through the rewrite stage (rtk missing: passes through with a decision)', async () => {
    await using tt = await createTerminator({
      env: { PATH: '/nonexistent' },
      overrides: { dbPath: join(dir, 'v.sqlite3') },
    });
    const call = { id: 'c', name: 'terminal', args: { command: 'git status' } };
    const step = await tt.reduceToolCall(call, ctx);
    expect(step.value.args['command']).toBe('git status');
  });
});

describe('createTerminator when the vault cannot be opened', () => {
  const garbage = (): string => {
    const path = join(dir, 'garbage.sqlite3');
    writeFileSync(path, Buffer.from('not a database at all \u0000\u00ff'.repeat(300)));
    return path;
  };
  const bigResult = {
    callId: 'c1',
    name: 'search_files',
    args: {},
    content: Array.from({ length: 4000 }, (_, i) => `match ${i} payload line`).join('\n'),
  };
  const bigRequest = {
    model: 'gpt-4o',
    messages: [
      { role: 'user', content: 'x '.repeat(30_000) },
      { role: 'assistant', content: 'ok' },
    ],
  };

  it("'throw' rejects with a VaultOpenError naming the path and the reason code, no content", async () => {
    const path = garbage();
    const error = await createTerminator({ env, overrides: { dbPath: path }, vaultErrors: 'throw' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(VaultOpenError);
    expect(error).toMatchObject({ code: 'E_VAULT_OPEN', path, reason: 'SQLITE_NOTADB' });
    expect((error as Error).message).toBe(`the vault at ${path} could not be opened (SQLITE_NOTADB)`);
    const underFile = await createTerminator({
      env,
      overrides: { dbPath: join(path, 'v.sqlite3') },
      vaultErrors: 'throw',
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(underFile).toMatchObject({
      name: 'VaultOpenError',
      code: 'E_VAULT_OPEN',
      path: join(path, 'v.sqlite3'),
      reason: 'ENOTDIR',
    });
  });

  it("'passthrough' (default) comes up: every step passes through unchanged with a failed_open decision", async () => {
    const path = garbage();
    const before = readFileSync(path);
    await using tt = await createTerminator({ env: { PATH: '' }, overrides: { dbPath: path, rtkPath: '/bin/true' } });
    const failed = {
      stage: 'runtime',
      kind: 'failed_open',
      reason: 'vault_unavailable',
      error: 'VaultOpenError:E_VAULT_OPEN',
    };
    const result = await tt.reduceToolResult(bigResult, ctx);
    expect(result.value).toBe(bigResult);
    expect(result.decisions).toEqual([failed]);
    const request = await tt.reduceRequest(bigRequest, {
      sessionId: 's1',
      route: { model: 'gpt-4o', contextWindow: 128_000 },
    });
    // Nothing is reduced, but the output cap still runs (it needs no vault): the answer must still fit.
    const { max_completion_tokens: cap, ...uncapped } = request.value;
    expect(uncapped).toEqual(bigRequest);
    expect(request.value['messages']).toBe(bigRequest['messages']);
    expect(cap).toBe(16_384);
    expect(request.decisions).toEqual([failed, { stage: 'capOutputBudget', kind: 'applied', reason: 'capped' }]);
    expect(tt.passThrough).toBe(true);
    const call = { id: 'c', name: 'terminal', args: { command: 'git status' } };
    const rewritten = await tt.reduceToolCall(call, ctx);
    expect(rewritten.value).toBe(call);
    expect(rewritten.decisions).toEqual([failed]);
    // The Observable pipelines too.
    const out = await firstValueFrom(from([createStep(bigResult, ctx)]).pipe(tt.toolResults(), toArray()));
    expect(out.map((s) => [s.value, s.decisions])).toEqual([[bigResult, [failed]]]);
    expect(await tt.pressure(bigRequest, ctx)).toBeGreaterThan(0);
    expect(readFileSync(path)).toEqual(before); // the broken file is left as it was
  });

  it('passthrough says so once per Terminator on stderr: path and reason code, no content', async () => {
    const path = garbage();
    const lines: string[] = [];
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation(((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    }) as typeof process.stderr.write);
    try {
      for (let i = 0; i < 2; i++) {
        await using tt = await createTerminator({ env, overrides: { dbPath: path } });
        await tt.reduceRequest({ model: 'gpt-4o', messages: [{ role: 'user', content: 'SECRET-PROMPT-TEXT' }] }, ctx);
        await tt.reduceToolResult({ ...bigResult, content: `SECRET-TOOL-TEXT ${bigResult.content}` }, ctx);
      }
    } finally {
      spy.mockRestore();
    }
    // Each Terminator says it once, however many calls it passes through; a second one is not
    // silenced by the first (no process-wide memory of what was printed).
    const line = `token-terminator: the vault at ${path} could not be opened (SQLITE_NOTADB); running in pass-through mode, nothing is reduced\n`;
    expect(lines).toEqual([line, line]);
  });

  it('passthrough: status reports the vault unavailable and the recovery tool answers a clear error', async () => {
    const path = garbage();
    await using tt = await createTerminator({ env, overrides: { dbPath: path } });
    const status = JSON.parse(await tt.recoveryTool.handle({ action: 'status' }, ctx)) as Record<string, unknown>;
    expect(status).toMatchObject({
      vault_available: false,
      vault_error: 'VaultOpenError:E_VAULT_OPEN',
      passthrough: true,
      vault_open_reason: 'SQLITE_NOTADB',
    });
    const get = JSON.parse(
      await tt.recoveryTool.handle({ action: 'artifact_get', artifact_id: `a_${'1'.repeat(32)}` }, ctx),
    ) as Record<string, unknown>;
    expect(get).toEqual({
      error: { code: 'E_VAULT_OPEN', message: `the vault at ${path} could not be opened (SQLITE_NOTADB)` },
    });
    const search = JSON.parse(await tt.recoveryTool.handle({ action: 'artifact_search', query: 'x' }, ctx)) as {
      error: { code: string };
    };
    expect(search.error.code).toBe('E_VAULT_OPEN');
    await expect(tt.vault.usage()).rejects.toBeInstanceOf(VaultOpenError);
    expect(tt.vault.path).toBe(path);
  });

  it('a healthy vault is not in pass-through: status reports it available', async () => {
    await using tt = await createTerminator({ env, overrides: { dbPath: join(dir, 'ok.sqlite3') } });
    const status = JSON.parse(await tt.recoveryTool.handle({ action: 'status' }, ctx)) as Record<string, unknown>;
    expect(status['vault_available']).toBe(true);
    expect(status['passthrough']).toBeUndefined();
  });

  it('bad configuration still throws, whatever vaultErrors says', async () => {
    const path = garbage();
    await expect(createTerminator({ env, overrides: { dbPath: path, vaultMaxBytes: 0 } })).rejects.toBeInstanceOf(
      ConfigError,
    );
    await expect(
      createTerminator({ env, overrides: { dbPath: path }, vaultErrors: 'ignore' as never }),
    ).rejects.toThrow(/createTerminator: vaultErrors/);
    for (const maxSessions of [0, 1.5, Infinity, Number.NaN])
      await expect(createTerminator({ env, overrides: { dbPath: path }, maxSessions })).rejects.toThrow(
        /createTerminator: options\.maxSessions must be an integer ≥ 1/,
      );
  });

  it('opens the vault with TOKEN_TERMINATOR_BUSY_TIMEOUT_MS: a lock held 1.5 s beats 50 ms, not the 10 s default', async () => {
    const path = join(dir, 'locked.sqlite3');
    await (await createVault({ path })).close();
    // Another process holds the write lock for 1.5 s (opening the vault blocks this event loop).
    const holdLock = async (): Promise<ChildProcess> => {
      const script =
        "const D=require('better-sqlite3');const d=new D(process.argv[1]);d.exec('BEGIN EXCLUSIVE');process.stdout.write('ready\\n');setTimeout(()=>{d.exec('ROLLBACK');d.close();},1500);";
      const child = spawn(process.execPath, ['-e', script, path], { stdio: ['ignore', 'pipe', 'inherit'] });
      await new Promise<void>((resolve) => child.stdout!.once('data', () => resolve()));
      return child;
    };
    const exited = (c: ChildProcess): Promise<unknown> =>
      c.exitCode === null ? new Promise((r) => c.once('exit', r)) : Promise.resolve();
    let holder = await holdLock();
    const short = await createTerminator({
      env: { TOKEN_TERMINATOR_BUSY_TIMEOUT_MS: '50' },
      overrides: { dbPath: path },
      vaultErrors: 'throw',
    }).then(
      async (tt) => (await tt.close(), undefined),
      (e: unknown) => e,
    );
    expect(short).toMatchObject({ code: 'E_VAULT_OPEN', reason: expect.stringMatching(/^SQLITE_BUSY/) });
    await exited(holder);
    holder = await holdLock();
    await using tt = await createTerminator({ env, overrides: { dbPath: path }, vaultErrors: 'throw' });
    expect(tt.config.busyTimeoutMs).toBe(10_000);
    expect((await tt.vault.usage()).artifacts).toBe(0);
    await exited(holder);
  });
});
