import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { artifactIdFor, createVault } from '../../src/vault/index.js';
import { writerContent } from '../fixtures/vault/contents.js';
import { startScript, tempDir } from './helpers.js';

const { dir, cleanup } = tempDir('tt-vault-crash-');
afterAll(cleanup);

interface Reported {
  readonly run: number;
  readonly i: number;
  readonly id: string;
}

/** Start a writer, let it report `after` stored artifacts, then SIGKILL it mid-loop. */
function killAfter(
  db: string,
  run: number,
  after: number,
): Promise<{ reported: Reported[]; signal: string | null; stderr: string }> {
  const child = startScript('kill-writer.ts', [db, String(run)]);
  const reported: Reported[] = [];
  let buffer = '';
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    buffer += chunk;
    const lines = buffer.split('\n');
    buffer = lines.pop() ?? '';
    for (const line of lines) {
      const [r, i, id] = line.split(' ');
      if (id !== undefined) reported.push({ run: Number(r), i: Number(i), id });
    }
    if (reported.length >= after && child.exitCode === null && !child.killed) child.kill('SIGKILL');
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (_code, signal) => resolve({ reported, signal, stderr }));
  });
}

describe('a writer killed with SIGKILL', () => {
  it('leaves an intact vault from which every reported artifact is recoverable', async () => {
    const db = join(dir, 'vault.sqlite3');
    const reported: Reported[] = [];
    // Two writers at a time (same file), each killed after a different number of stored puts.
    for (let run = 0; run < 10; run += 2) {
      const results = await Promise.all([run, run + 1].map((r) => killAfter(db, r, 3 + ((r * 7) % 12))));
      for (const result of results) {
        expect(result.stderr).toBe('');
        // The writer loops forever, so only the kill ends it; a stop without one is a crash to report.
        expect(result.signal, `the writer stopped before the kill after ${result.reported.length} puts`).toBe(
          'SIGKILL',
        );
        reported.push(...result.reported);
      }
    }
    expect(reported.length).toBeGreaterThanOrEqual(30);

    const raw = new Database(db, { readonly: true });
    expect(raw.pragma('integrity_check', { simple: true })).toBe('ok');
    raw.close();

    await using vault = await createVault({ path: db });
    for (const { run, i, id } of reported) {
      const content = writerContent(run, i);
      expect(id).toBe(artifactIdFor(content));
      expect(await vault.verify(id)).toBe(true);
      expect((await vault.page(id)).content).toBe(content);
    }
    const usage = await vault.usage();
    expect(usage.artifacts).toBeGreaterThanOrEqual(reported.length);
  });
});
