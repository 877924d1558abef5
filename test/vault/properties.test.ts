import { join } from 'node:path';
import { fc, test } from '@fast-check/vitest';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { VaultContentError, createVault, sha256Hex, type Vault } from '../../src/vault/index.js';
import { isWellFormedText } from '../../src/vault/identity.js';
import { anyText } from '../../src/testing/index.js';
import { tempDir } from './helpers.js';

const { dir, cleanup } = tempDir();
let vault: Vault;
const MAX_PAGE = 64;

beforeAll(async () => {
  vault = await createVault({ path: join(dir, 'props.sqlite3'), maxPageChars: MAX_PAGE });
});
afterAll(async () => {
  await vault.close();
  cleanup();
});

async function readPaged(id: string, sizes: readonly number[]): Promise<string> {
  let out = '';
  let offset: number | null = 0;
  for (let i = 0; offset !== null; i++) {
    const page = await vault.page(id, offset, sizes[i % sizes.length]);
    expect(page.offset).toBe(offset);
    out += page.content;
    offset = page.nextOffset;
  }
  return out;
}

describe('vault properties', () => {
  test.prop([anyText({ maxLength: 400 }), fc.array(fc.integer({ min: 1, max: 100 }), { minLength: 1, maxLength: 5 })], {
    numRuns: 100,
  })('put then paging concatenates to the exact original', async (content, sizes) => {
    const put = await vault.put({ content, toolName: 'prop' });
    expect(put.chars).toBe([...content].length);
    expect(put.bytes).toBe(Buffer.byteLength(content, 'utf8'));
    expect(await readPaged(put.artifactId, sizes)).toBe(content);
    expect(await vault.verify(put.artifactId)).toBe(true);
  });

  test.prop([anyText({ maxLength: 200 })], { numRuns: 50 })(
    'the same content twice gives the same id and one stored row',
    async (content) => {
      const before = (await vault.usage()).artifacts;
      const first = await vault.put({ content, callId: 'one' });
      const second = await vault.put({ content, callId: 'two' });
      expect(second.artifactId).toBe(first.artifactId);
      expect(second.sha256).toBe(sha256Hex(content));
      expect(second.created).toBe(false);
      expect((await vault.usage()).artifacts).toBe(before + (first.created ? 1 : 0));
    },
  );

  // UTF-16 code units, so lone surrogates (high or low, anywhere) are common: the kit's anyText
  // draws whole code points and never produces one, so this generator stays here.
  const units = fc.string({
    unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)),
    maxLength: 40,
  });
  test.prop([units], { numRuns: 100 })('lone surrogates are refused, everything else round-trips', async (content) => {
    if (isWellFormedText(content)) {
      const { artifactId } = await vault.put({ content });
      expect(await readPaged(artifactId, [7])).toBe(content);
    } else {
      const before = await vault.usage();
      await expect(vault.put({ content })).rejects.toBeInstanceOf(VaultContentError);
      expect(await vault.usage()).toEqual(before);
    }
  });

  test.prop([anyText({ minLength: 1, maxLength: 120 }), fc.nat(), fc.integer({ min: 1, max: 30 })], { numRuns: 60 })(
    'search finds an artifact by any substring of its content',
    async (content, start, length) => {
      const cps = [...content];
      const from = start % cps.length;
      const needle = cps.slice(from, from + length).join('');
      await using fresh = await createVault({ path: ':memory:' });
      const { artifactId } = await fresh.put({ content });
      await fresh.put({ content: 'decoy 1' });
      const ids = (await fresh.search(needle)).map((h) => h.artifactId);
      if (needle.trim() === '') expect(ids).toEqual([]);
      else expect(ids).toContain(artifactId);
    },
  );

  test.prop([anyText({ maxLength: 30 })], { numRuns: 100 })(
    'search accepts any query without throwing',
    async (query) => {
      const hits = await vault.search(query);
      expect(hits.length).toBeLessThanOrEqual(50);
    },
  );
});
