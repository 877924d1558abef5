import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { replaySessions, type RecordedSession } from '../../src/replay/index.js';
import { readMetricsSummary } from '../support/metrics-summary.js';

// A unique string planted in every content field: system, user and assistant text, tool-call
// arguments, and tool output (large and repeated, so every reduction path sees it).
const CANARY = `CANARY-${Math.random().toString(36).slice(2)}-7f3e`;
const output = (n: number): string =>
  Array.from({ length: n }, (_, i) => `src/file_${i}.ts:${i}: ${CANARY} match ${i % 7}`).join('\n');
const call = (id: string, name: string, args: Record<string, unknown>) => ({
  role: 'assistant',
  content: `Running ${CANARY}`,
  tool_calls: [{ id, type: 'function', function: { name, arguments: JSON.stringify(args) } }],
});
const session: RecordedSession = {
  id: 'canary-session',
  model: 'gpt-4o',
  messages: [
    { role: 'system', content: `System ${CANARY}` },
    { role: 'user', content: `Task ${CANARY}` },
    call('c1', 'search_files', { pattern: CANARY, path: '.' }),
    { role: 'tool', tool_call_id: 'c1', content: output(700) },
    call('c2', 'bash', { command: `grep -rn ${CANARY} .` }),
    { role: 'tool', tool_call_id: 'c2', content: output(400) },
    call('c3', 'bash', { command: `grep -rn ${CANARY} .` }),
    { role: 'tool', tool_call_id: 'c3', content: output(400) },
    call('c4', 'read_file', { path: `${CANARY}.ts` }),
    { role: 'tool', tool_call_id: 'c4', content: output(700) },
    { role: 'user', content: `Again ${CANARY}` },
    call('c5', 'search_files', { pattern: CANARY, path: '.' }),
    { role: 'tool', tool_call_id: 'c5', content: output(700) },
    { role: 'assistant', content: `Done ${CANARY}` },
  ],
};

let dir: string;
const logged: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tt-canary-'));
  const capture = (chunk: unknown): boolean => {
    logged.push(String(chunk));
    return true;
  };
  const spies = [
    vi.spyOn(process.stdout, 'write').mockImplementation(capture),
    vi.spyOn(process.stderr, 'write').mockImplementation(capture),
    ...(['log', 'info', 'warn', 'error', 'debug'] as const).map((m) =>
      vi.spyOn(console, m).mockImplementation((...args: unknown[]) => void logged.push(args.map(String).join(' '))),
    ),
  ];
  try {
    await replaySessions([session], {
      env: {},
      db: join(dir, 'vault.sqlite3'),
      ledger: join(dir, 'ledger.sqlite3'),
      dump: join(dir, 'dump.jsonl'),
    });
  } finally {
    for (const s of spies) s.mockRestore();
  }
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('content privacy of telemetry (canary)', () => {
  it('the canary really flowed through the pipeline (the dump holds final requests)', () => {
    expect(readFileSync(join(dir, 'dump.jsonl'), 'utf8')).toContain(CANARY);
  });

  it('appears in no metrics table row of the vault', () => {
    const db = new Database(join(dir, 'vault.sqlite3'), { readonly: true });
    try {
      const metrics = db.prepare('SELECT * FROM request_metrics').all();
      const components = db.prepare('SELECT * FROM request_component_metrics').all();
      expect(metrics.length).toBe(6);
      expect(components.length).toBeGreaterThan(0);
      const text = JSON.stringify([metrics, components, db.prepare('SELECT sql FROM sqlite_master').all()]);
      expect(text).not.toContain(CANARY);
      expect(text).not.toContain('match 3');
    } finally {
      db.close();
    }
    expect(JSON.stringify(readMetricsSummary(join(dir, 'vault.sqlite3')))).not.toContain(CANARY);
  });

  it('appears in no byte of the ledger database after a WAL checkpoint', () => {
    const path = join(dir, 'ledger.sqlite3');
    const db = new Database(path);
    db.pragma('wal_checkpoint(TRUNCATE)');
    const sessions = db.prepare('SELECT * FROM sessions').all();
    const turns = db.prepare('SELECT * FROM turns').all();
    db.close();
    expect(sessions.length).toBe(1);
    expect(turns.length).toBe(2);
    const needle = Buffer.from(CANARY, 'utf8');
    for (const file of [path, `${path}-wal`, `${path}-shm`]) {
      if (existsSync(file)) expect(readFileSync(file).includes(needle)).toBe(false);
    }
    expect(JSON.stringify([sessions, turns])).not.toContain(CANARY);
  });

  it('appears in no log line', () => {
    expect(logged.join('\n')).not.toContain(CANARY);
  });
});
