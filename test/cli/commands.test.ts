import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { run } from '../../src/cli/program.js';
import { createVault } from '../../src/vault/index.js';
import { freshSchema } from '../support/postgres.js';

// In-process runs of the same program the child-process tests start: output formats and exit codes.
let dir: string;
let db: string;
let logId: string;
let jsonId: string;
const LOG = `build started\n${'step ok\n'.repeat(200)}ERROR: link failed 𝄞\nwarning: retrying\ndone`;
const JSON_CONTENT = JSON.stringify({ status: 'failed', errors: ['Timeout in step 3'], count: 2 });

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const capture = (sink: string[]) => (chunk: string | Uint8Array) => {
    sink.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    return true;
  };
  const o = vi.spyOn(process.stdout, 'write').mockImplementation(capture(out) as typeof process.stdout.write);
  const e = vi.spyOn(process.stderr, 'write').mockImplementation(capture(err) as typeof process.stderr.write);
  try {
    const code = await run(args);
    return { code, out: out.join(''), err: err.join('') };
  } finally {
    o.mockRestore();
    e.mockRestore();
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tt-cli-inproc-'));
  db = join(dir, 'vault.sqlite3');
  vi.stubEnv('HOME', dir);
  for (const name of Object.keys(process.env)) if (name.startsWith('TOKEN_TERMINATOR_')) vi.stubEnv(name, undefined);
  const vault = await createVault({ path: db });
  logId = (await vault.put({ content: LOG, toolName: 'terminal' })).artifactId;
  jsonId = (await vault.put({ content: JSON_CONTENT, toolName: 'process' })).artifactId;
  await vault.close();
});

afterAll(() => {
  vi.unstubAllEnvs();
  rmSync(dir, { recursive: true, force: true });
});

describe('artifact commands', () => {
  it('get writes the exact content and nothing else', async () => {
    const r = await cli(['artifact', 'get', logId, '--db', db]);
    expect(r).toEqual({ code: 0, out: LOG, err: '' });
  });

  it('peek prints a lossy synopsis, or its JSON', async () => {
    const text = await cli(['artifact', 'peek', logId, '--db', db]);
    expect(text.code).toBe(0);
    expect(text.out).toContain(`${logId}  tool=terminal  chars=${[...LOG].length}`);
    expect(text.out).toContain('signals:\n  ERROR: link failed 𝄞\n  warning: retrying');
    expect(text.out).toContain('tail:\n');
    expect(text.out).toContain(`exact content: token-terminator artifact get ${logId}`);
    const json = await cli(['artifact', 'peek', jsonId, '--db', db, '--json']);
    expect(JSON.parse(json.out)).toMatchObject({
      artifact_id: jsonId,
      lossy: true,
      structure: { type: 'object', key_count: 3 },
    });
  });

  it('find prints grep-style line:text, or its JSON', async () => {
    const text = await cli(['artifact', 'find', logId, 'error', '--db', db]);
    expect(text).toEqual({ code: 0, out: '202:ERROR: link failed 𝄞\n', err: '' });
    const json = await cli(['artifact', 'find', logId, 'step', '--db', db, '--json', '--limit', '5']);
    expect(JSON.parse(json.out)).toMatchObject({ total_matches: 200, truncated: true });
    expect(JSON.parse(json.out).matches).toHaveLength(5);
    const shown = await cli(['artifact', 'find', logId, 'step', '--db', db, '--limit', '2']);
    expect(shown.err).toBe('(2 of 200 matches shown)\n');
  });

  it('search prints one row per artifact, or its JSON', async () => {
    const text = await cli(['artifact', 'search', 'timeout', '--db', db]);
    expect(text.out).toMatch(new RegExp(`^${jsonId}\\t${JSON_CONTENT.length} chars\\tprocess\\t\\S+\\n$`));
    const json = await cli(['artifact', 'search', 'terminal', '--db', db, '--json']);
    expect(JSON.parse(json.out).results.map((r: { artifact_id: string }) => r.artifact_id)).toEqual([logId]);
    const none = await cli(['artifact', 'search', 'nothing-like-this', '--db', db]);
    expect(none).toEqual({ code: 0, out: '', err: 'no artifacts match\n' });
  });

  it('get --json returns one page as the tool does', async () => {
    const r = await cli(['artifact', 'get', logId, '--db', db, '--json', '--offset', '6', '--limit', '7']);
    expect(JSON.parse(r.out)).toMatchObject({ content: 'started', offset: 6, next_offset: 13 });
  });
});

describe('wording', () => {
  it('artifact get of an unknown id points to the artifact search command, not the tool action', async () => {
    const r = await cli(['artifact', 'get', 'a_0123456789abcdef0123', '--db', db]);
    expect(r.code).toBe(2);
    expect(r.err).toContain('`token-terminator artifact search`');
    expect(r.err).not.toContain('artifact_search');
  });

  it('stats says "1 session" and, when the final side is larger, "% more" instead of a negative "% fewer"', async () => {
    const path = join(dir, 'grown.sqlite3');
    {
      await using v = await createVault({ path });
      await v.recordRequestMetric({
        sessionId: 's1',
        requestId: 'r1',
        mode: 'balanced',
        rawChars: 100,
        finalChars: 150,
        rawTokens: 100,
        finalTokens: 150,
        receipts: 0,
        failedOpen: true,
      });
    }
    const r = await cli(['stats', '--db', path]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/\b1 session\b/);
    expect(r.out).toContain('50.00 % more');
    expect(r.out).not.toContain('fewer');
    expect(r.out).toMatch(/\b1 failed-open request\b/);
  });
});

describe('--db-url', () => {
  const doc = readFileSync(new URL('../../docs/shared-vault.md', import.meta.url), 'utf8');
  const named = /# ([a-z, ]+) take --db-url/.exec(doc)?.[1]?.split(/, | and /) ?? [];

  it('every command docs/shared-vault.md says takes --db-url offers it', async () => {
    expect(named).toEqual(['status', 'stats', 'artifact', 'compare', 'proxy']);
    for (const command of named) {
      const r = await cli(command === 'artifact' ? ['artifact', 'get', '--help'] : [command, '--help']);
      expect(r.out, command).toContain('--db-url <url>');
    }
  });

  it.skipIf(inject('pgUrl') === '')('compare reads the ledger in the database --db-url names', async () => {
    const schema = await freshSchema(inject('pgUrl'), 'compare');
    try {
      const r = await cli(['compare', 'off', 'balanced', '--db-url', schema.url]);
      expect(r.err).toBe('');
      expect(r.code).toBe(0);
      expect(r.out).toMatch(/^experiment \S+: off vs balanced/);
    } finally {
      await schema.drop();
    }
  });

  it('compare refuses --ledger with --db-url (exit 2)', async () => {
    const r = await cli(['compare', 'off', 'balanced', '--ledger', join(dir, 'l.sqlite3'), '--db-url', 'postgres://x']);
    expect(r.code).toBe(2);
    expect(r.err).toContain('give --ledger or --db-url, not both');
  });
});

describe('the shipped sample session', () => {
  it('is in the package files', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { files: string[] };
    expect(pkg.files).toContain('examples/sessions/sample.jsonl');
  });

  it('replay --sample replays it; replay without a file or --sample says what to give (exit 2)', async () => {
    const r = await cli(['replay', '--sample', '--json']);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    const figures = JSON.parse(r.out) as { sessions: unknown[]; requests: number };
    expect(figures.sessions).toHaveLength(1);
    expect(figures.requests).toBeGreaterThan(0);
    const none = await cli(['replay']);
    expect(none.code).toBe(2);
    expect(none.err).toContain('--sample');
  }, 120_000);

  it('report --sample writes the page from a replay of it', async () => {
    const out = join(dir, 'sample-report.html');
    const r = await cli(['report', '--sample', '--out', out]);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^report: \d+ requests in 1 session → /);
    expect(readFileSync(out, 'utf8')).toContain('<html');
  }, 120_000);
});

describe('status', () => {
  it('fails (exit 2) naming TOKEN_TERMINATOR_TOKENIZER_JSON when its file is missing', async () => {
    vi.stubEnv('TOKEN_TERMINATOR_TOKENIZER_JSON', join(dir, 'missing-tokenizer.json'));
    try {
      const r = await cli(['status', '--db', db]);
      expect(r.code).toBe(2);
      expect(r.out).toBe('');
      expect(r.err).toContain('TOKEN_TERMINATOR_TOKENIZER_JSON names no file');
    } finally {
      vi.stubEnv('TOKEN_TERMINATOR_TOKENIZER_JSON', undefined);
    }
  });

  it('prints flattened key: value lines', async () => {
    const r = await cli(['status', '--db', db]);
    expect(r.code).toBe(0);
    expect(r.out).toContain('mode: balanced\n');
    expect(r.out).toContain('vault.artifacts: 2\n');
    expect(r.out).toContain(`db_path: ${db}\n`);
  });
});

describe('exit codes', () => {
  it.each([
    [['artifact', 'get', 'a_1', '--db', 'DB', '--limit', '0'], '--limit'],
    [['artifact', 'get', 'a_1', '--db', 'DB', '--offset', 'x'], '--offset'],
    [['artifact', 'find', 'a_1', '--db', 'DB'], 'missing required argument'],
    [['artifact', 'find', 'ID', '  ', '--db', 'DB'], 'query must not be empty'],
    [['artifact', 'peek', 'a_nope', '--db', 'DB'], 'unknown artifact a_nope'],
    [['artifact', 'get', 'a_1', '--db', 'ABSENT'], 'no vault at'],
    [['stats', '--db', 'ABSENT'], 'no vault at'],
    [['frobnicate'], "unknown command 'frobnicate'"],
  ])('exits 2 for %j', async (args, message) => {
    const resolved = args.map((a) =>
      a === 'DB' ? db : a === 'ABSENT' ? join(dir, 'absent.sqlite3') : a === 'ID' ? logId : a,
    );
    const r = await cli(resolved);
    expect(r.code).toBe(2);
    expect(r.out).toBe('');
    expect(r.err).toContain(message);
  });

  it('exits 0 for --help and --version', async () => {
    expect((await cli(['--version'])).code).toBe(0);
    expect((await cli(['artifact', 'get', '--help'])).code).toBe(0);
  });

  it('does not create a vault for reading commands', async () => {
    await cli(['artifact', 'get', 'a_1', '--db', join(dir, 'absent.sqlite3')]);
    await cli(['stats', '--db', join(dir, 'absent.sqlite3')]);
    expect(existsSync(join(dir, 'absent.sqlite3'))).toBe(false);
  });
});

describe('replay input checks', () => {
  const write = (name: string, sessions: unknown[]): string => {
    const path = join(dir, name);
    writeFileSync(path, sessions.map((s) => JSON.stringify(s)).join('\n'));
    return path;
  };
  const user = { role: 'user', content: 'fix the test' };
  const assistant = { role: 'assistant', content: 'done' };

  it('rejects an unknown role, naming the line and message, exit 2', async () => {
    const r = await cli([
      'replay',
      write('roles.jsonl', [
        { id: 'a', messages: [user, assistant] },
        { id: 'b', messages: [user, { role: 'robot', content: 'x' }] },
      ]),
    ]);
    expect(r.code).toBe(2);
    expect(r.err).toContain('line 2: message 2 has unknown role "robot"');
  });

  it('rejects a file whose sessions have no assistant turn, exit 2', async () => {
    const r = await cli(['replay', write('silent.jsonl', [{ id: 'a', messages: [user] }])]);
    expect(r.code).toBe(2);
    expect(r.err).toContain('no session has an assistant turn');
  });

  it('warns about each session without an assistant turn and replays the others', async () => {
    const r = await cli([
      'replay',
      '--json',
      write('mixed.jsonl', [
        { id: 'quiet', messages: [user] },
        { id: 'talks', messages: [user, assistant] },
      ]),
    ]);
    expect(r.code).toBe(0);
    expect(r.err).toContain('warning: session "quiet" has no assistant turn');
    expect(r.err).not.toContain('"talks"');
    expect(JSON.parse(r.out)).toMatchObject({ requests: 1 });
  });
});

describe('bench', () => {
  it('without rtk prints no rtk row, only the note that it is left out; with one, the rtk row', async () => {
    const empty = mkdtempSync(join(dir, 'no-rtk-'));
    // git is needed for case 1; any rtk this machine may have is not.
    const withoutRtk = (process.env['PATH'] ?? '')
      .split(delimiter)
      .filter((d) => d !== '' && !existsSync(join(d, 'rtk')));
    vi.stubEnv('PATH', [empty, ...withoutRtk].join(delimiter));
    try {
      const r = await cli(['bench']);
      expect(r.code).toBe(0);
      const named = r.out.split('\n').filter((l) => /rtk/i.test(l));
      expect(named).toEqual(
        [
          'no rtk binary (TOKEN_TERMINATOR_RTK_PATH or PATH): the rtk-binary row is left out.',
          expect.stringContaining("case 1 (the reference's rtk_terminal_rewrite)"),
        ].sort(),
      );
      expect(r.out).toContain('terminal git diff (built-in compactor)');

      const fakeRtk = join(empty, 'rtk');
      writeFileSync(fakeRtk, '#!/bin/sh\necho "M benchmark_fixture.txt +1 -1"\n');
      chmodSync(fakeRtk, 0o755);
      const withRtk = await cli(['bench']);
      expect(withRtk.out).toContain('rtk_terminal_rewrite (rtk binary)');
      expect(withRtk.out).toContain('the rtk-binary row runs the rtk found');
    } finally {
      vi.stubEnv('PATH', process.env['PATH']);
    }
  }, 120_000);
});
