/**
 * `scopedReads(…).read`: the whole content of an artifact in one store read, on both dialects (a
 * page loads the whole artifact, so a read page by page loaded it once per page), and holding no
 * more than about one copy of it (kept as they came, pages kept a whole copy each alive: issue 49, a
 * gateway worker's heap filled by the pages of one 1.9 MB output). Memory, not time: the live heap
 * is measured after a full collection.
 */
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ArtifactNotFoundError } from '../../src/errors.js';
import { createVault, scopedReads, type ArtifactStore, type Vault } from '../../src/vault/index.js';
import { DIALECTS, freshStore } from './dialects.js';
import { tempDir } from './helpers.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

let dir = '';
let cleanup = (): void => undefined;
let vault: Vault | undefined;
beforeEach(() => {
  ({ dir, cleanup } = tempDir());
});
afterEach(async () => {
  await vault?.close();
  vault = undefined;
  cleanup();
});

describe('scopedReads read', () => {
  it('holds about one copy of a many-page artifact while reading it, not one per page', async () => {
    const chars = 400_000;
    const pageChars = 1000;
    vault = await createVault({ path: join(dir, 'vault.sqlite3'), maxPageChars: pageChars });
    const content = Array.from({ length: chars / 40 }, (_, i) => `line ${String(i).padStart(8, '0')} of the log.....\n`)
      .join('')
      .slice(0, chars);
    const { artifactId } = await vault.put({ content, toolName: 'terminal' }, { tenant: '', sessionId: 's' });
    gc();
    const before = process.memoryUsage().heapUsed;
    let atLastPage = 0;
    const v = vault;
    // The store as it is, measured when it hands over the whole content (or the last page of it):
    // every earlier page is held by then.
    const measured = new Proxy(v, {
      get(target, key) {
        if (key === 'read')
          return async (...args: Parameters<ArtifactStore['read']>) => {
            const text = await target.read(...args);
            gc();
            atLastPage = process.memoryUsage().heapUsed - before;
            return text;
          };
        if (key !== 'page') return Reflect.get(target, key) as unknown;
        return async (...args: Parameters<ArtifactStore['page']>) => {
          const page = await target.page(...args);
          if (page.nextOffset === null) {
            gc();
            atLastPage = process.memoryUsage().heapUsed - before;
          }
          return page;
        };
      },
    });
    const text = await scopedReads(measured, { tenant: '', sessionId: 's' }).read(artifactId);
    expect(text).toBe(content);
    // 400 pages each holding its own copy of the 400 kB content: 90 MB measured. Copies of the pages: under 8 MB.
    expect(atLastPage).toBeLessThan(8 * 2 ** 20);
  });
});

for (const dialect of DIALECTS) {
  describe(`scopedReads read on ${dialect}`, () => {
    it('reads a many-page artifact from the store once, not once per page', async () => {
      const store = await freshStore(dialect);
      try {
        const v = await store.open({ maxPageChars: 1000 });
        const content = Array.from({ length: 2000 }, (_, i) => `line ${i} αβγ 🙂\n`).join('');
        const scope = { tenant: 't', sessionId: 's' };
        const { artifactId } = await v.put({ content, toolName: 'terminal' }, scope);
        expect((await v.page(artifactId, 0, undefined, scope)).nextOffset).not.toBeNull();
        // Every store read that loads the artifact: a page loads all of it, as a whole read does.
        const loads: string[] = [];
        const counted = new Proxy(v, {
          get(target, key) {
            const value = Reflect.get(target, key) as unknown;
            if (key !== 'page' && key !== 'read' && key !== 'peek' && key !== 'find') return value;
            return (...args: unknown[]) => {
              loads.push(key);
              return (value as (...a: unknown[]) => unknown).apply(target, args);
            };
          },
        });
        const reads = scopedReads(counted, scope);
        expect(await reads.read(artifactId)).toBe(content);
        expect(loads).toEqual(['read']);
        // The scope still holds: another tenant's read of the id does not find it.
        await expect(scopedReads(counted, { tenant: 'u', sessionId: 's' }).read(artifactId)).rejects.toThrow(
          ArtifactNotFoundError,
        );
      } finally {
        await store.cleanup();
      }
    });
  });
}
