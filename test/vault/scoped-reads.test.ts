/**
 * `scopedReads(…).read`: the whole content of an artifact, page by page, holding no more than about
 * one copy of it at a time (a page is a slice of the content the store loaded for it; kept as it
 * came, each page kept that whole copy alive: issue 49, a gateway worker's heap filled by the pages
 * of one 1.9 MB output). Memory, not time: the live heap is measured after a full collection.
 */
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createVault, scopedReads, type ArtifactStore, type Vault } from '../../src/vault/index.js';
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
    // The store as it is, measured when the last page is asked for: every earlier page is held by then.
    const measured = new Proxy(v, {
      get(target, key) {
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
