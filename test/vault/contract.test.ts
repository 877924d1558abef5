/**
 * The storage ports' contract, run once per dialect (DIALECTS: a SQLite file and a PostgreSQL
 * schema): round trip, dedup, collision-safe ids, provenance, paging, peek/find/search, leases,
 * baselines, renderings, metrics, capacity, the schema-version refusal and the lifetime. SQLite-only
 * behaviour (file permissions, WAL, the deferred FTS queue) is in sqlite.test.ts, PostgreSQL-only
 * behaviour (TLS, reconnects, NUL, bytea) in postgres.test.ts.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ArtifactNotFoundError,
  ConfigError,
  VaultCapacityError,
  VaultSchemaError,
  VaultVerifyError,
} from '../../src/errors.js';
import {
  SCHEMA_VERSION,
  VaultArgumentError,
  VaultContentError,
  artifactIdFor,
  createVault,
  sha256Hex,
  type Vault,
  type VaultOptions,
} from '../../src/vault/index.js';
import { COUNT_TTL_MS } from '../../src/vault/token-counts.js';
import { DIALECTS, freshStore, type FreshStore } from './dialects.js';

async function readAll(v: Vault, id: string, limit?: number): Promise<string> {
  let out = '';
  let offset: number | null = 0;
  while (offset !== null) {
    const page = await v.page(id, offset, limit);
    out += page.content;
    offset = page.nextOffset;
  }
  return out;
}

for (const dialect of DIALECTS) {
  describe(`vault contract on ${dialect}`, () => {
    let store: FreshStore;
    beforeEach(async () => {
      store = await freshStore(dialect);
    });
    afterEach(async () => {
      await store.cleanup();
    });
    const vaultAt = (options: Omit<Partial<VaultOptions>, 'path' | 'url'> = {}): Promise<Vault> => store.open(options);

    describe('put', () => {
      it('returns the reference ids and stores the same content once', async () => {
        const v = await vaultAt();
        const first = await v.put({ content: 'result', toolName: 'terminal' });
        const again = await v.put({ content: 'result', toolName: 'grep' });
        expect(first).toEqual({
          artifactId: 'a_f6a214f7a5fcda0c2cee9660b7fc29f5',
          sha256: sha256Hex('result'),
          created: true,
          chars: 6,
          bytes: 6,
        });
        expect(again.artifactId).toBe(first.artifactId);
        expect(again.created).toBe(false);
        expect((await v.put({ content: '' })).artifactId).toBe('a_e3b0c44298fc1c149afbf4c8996fb924');
        expect((await v.put({ content: 'evidence αβγ\n' })).artifactId).toBe('a_c2d2e24775ccc58a68150bda9ba8c0a6');
        expect((await v.usage()).artifacts).toBe(3);
        expect((await v.summary(first.artifactId))?.observationCount).toBe(2);
      });

      it('tells each tenant only its own observations of shared content: tool name, first sighting and count', async () => {
        let now = Date.parse('2026-01-01T00:00:00Z');
        const v = await vaultAt({ clock: () => now });
        const a = { tenant: 'k_tenant-a', sessionId: 's1' };
        const b = { tenant: '', sessionId: 's1' };
        const c = { tenant: 'k_tenant-c', sessionId: 's1' };
        const id = (
          await v.put(
            { content: 'shared bytes\n'.repeat(50), toolName: 'secret_tool_of_a', sessionId: 's1', callId: 'a1' },
            a,
          )
        ).artifactId;
        await v.put(
          { content: 'shared bytes\n'.repeat(50), toolName: 'secret_tool_of_a', sessionId: 's1', callId: 'a2' },
          a,
        );
        now += 3_600_000;
        await v.put({ content: 'shared bytes\n'.repeat(50), toolName: 'terminal', sessionId: 's1', callId: 'b1' }, b);
        const ofA = await v.summary(id, a);
        const ofB = await v.summary(id, b);
        expect(ofA).toMatchObject({
          toolName: 'secret_tool_of_a',
          observationCount: 2,
          createdAt: '2026-01-01T00:00:00.000Z',
        });
        // B stored the same bytes an hour later: it sees its own sighting, never A's tool, count or time.
        expect(ofB).toMatchObject({ toolName: 'terminal', observationCount: 1, createdAt: '2026-01-01T01:00:00.000Z' });
        const peek = await v.peek(id, 2000, b);
        expect([peek.toolName, peek.observationCount, peek.createdAt]).toEqual([
          'terminal',
          1,
          '2026-01-01T01:00:00.000Z',
        ]);
        expect((await v.page(id, 0, 10, b)).toolName).toBe('terminal');
        const [hit] = await v.search('shared bytes', 5, b);
        expect(hit).toMatchObject({ toolName: 'terminal', observationCount: 1 });
        // A search by tool name matches the names the searching tenant gave, never another's.
        expect(await v.search('secret_tool', 5, b)).toEqual([]);
        expect((await v.search('SECRET_TOOL', 5, a)).map((s) => s.artifactId)).toEqual([id]);
        expect((await v.search('Terminal', 5, b)).map((s) => s.artifactId)).toEqual([id]);
        // A tenant that never stored it cannot read it at all; the trusted, unscoped view counts everyone.
        expect(await v.summary(id, c)).toBeUndefined();
        expect((await v.summary(id))?.observationCount).toBe(3);
      });

      it('counts chars in code points and bytes in UTF-8', async () => {
        const v = await vaultAt();
        const r = await v.put({ content: 'a😀é' });
        expect(r.chars).toBe(3);
        expect(r.bytes).toBe(1 + 4 + 2);
      });

      it('uses the full digest when another artifact owns the 32-hex prefix', async () => {
        const v = await vaultAt();
        await v.close();
        const shortId = artifactIdFor('result');
        await store
          .raw()
          .insertInto('artifacts')
          .values({
            artifact_id: shortId,
            sha256: `${shortId.slice(2)}${'0'.repeat(32)}`,
            char_count: 5,
            byte_count: 5,
            tool_name: '',
            created_at: '2020-01-01T00:00:00.000Z',
            last_observed_at: '2020-01-01T00:00:00.000Z',
            content: store.encode('other'),
          })
          .execute();
        const reopened = await vaultAt();
        const r = await reopened.put({ content: 'result' });
        expect(r.artifactId).toBe(`a_${sha256Hex('result')}`);
        expect(r.artifactId).toHaveLength(66);
        expect((await reopened.page(r.artifactId)).content).toBe('result');
        expect(await reopened.verify(r.artifactId)).toBe(true);
        // The stand-in row's content does not hash to its (made-up) digest: reads verify, and refuse it.
        await expect(reopened.page(shortId)).rejects.toBeInstanceOf(VaultVerifyError);
        expect(await reopened.verify(shortId)).toBe(false);
        expect((await reopened.put({ content: 'result' })).artifactId).toBe(r.artifactId);
      });

      it('keeps provenance (canonical args) private', async () => {
        const v = await vaultAt();
        const { artifactId } = await v.put({
          content: 'x'.repeat(50),
          toolName: 'terminal',
          args: { secret: 'TOKEN-123', a: 1 },
          sessionId: 's1',
          callId: 'call-1',
        });
        await v.put({
          content: 'x'.repeat(50),
          toolName: 'terminal',
          args: { a: 1, secret: 'TOKEN-123' },
          sessionId: 's1',
          callId: 'call-1',
        });
        const visible = JSON.stringify([
          await v.summary(artifactId),
          await v.page(artifactId),
          await v.peek(artifactId),
          await v.search('xxx'),
        ]);
        expect(visible).not.toContain('TOKEN-123');
        expect(visible).not.toContain('call-1');
        const rows = await store
          .raw()
          .selectFrom('artifact_observations')
          .select(['session_id', 'tool_call_id', 'tool_name', 'args_json'])
          .execute();
        expect(rows).toEqual([
          {
            session_id: 's1',
            tool_call_id: 'call-1',
            tool_name: 'terminal',
            args_json: '{"a":1,"secret":"TOKEN-123"}',
          },
        ]);
      });

      it('refuses content with a lone surrogate without writing', async () => {
        const v = await vaultAt();
        await expect(v.put({ content: 'ok \ud800 broken' })).rejects.toBeInstanceOf(VaultContentError);
        await expect(v.put({ content: '\udfff' })).rejects.toMatchObject({ code: 'E_VAULT_CONTENT' });
        expect((await v.usage()).artifacts).toBe(0);
        expect((await v.put({ content: '𝔘\ud835\udd18' })).chars).toBe(2);
      });

      it('fails when the read-back does not match (tampered row)', async () => {
        const v = await vaultAt();
        const { artifactId } = await v.put({ content: 'genuine' });
        await v.close();
        await store
          .raw()
          .updateTable('artifacts')
          .set({ content: store.encode('forged!') })
          .where('artifact_id', '=', artifactId)
          .execute();
        const again = await vaultAt();
        await expect(again.put({ content: 'genuine' })).rejects.toBeInstanceOf(VaultVerifyError);
        expect(await again.verify(artifactId)).toBe(false);
        expect(await again.verify('a_unknown')).toBe(false);
      });
    });

    describe('page', () => {
      it('pages by code points with a null next offset at the end', async () => {
        const v = await vaultAt({ maxPageChars: 4 });
        const content = 'ab😀cdé𝔘fg';
        const { artifactId } = await v.put({ content, toolName: 'read_file' });
        const first = await v.page(artifactId, 0, 100);
        expect(first).toMatchObject({
          content: 'ab😀c',
          offset: 0,
          nextOffset: 4,
          totalChars: 9,
          toolName: 'read_file',
        });
        expect((await v.page(artifactId, 4, 3)).content).toBe('dé𝔘');
        expect((await v.page(artifactId, 8)).nextOffset).toBeNull();
        expect(await v.page(artifactId, 99)).toMatchObject({ content: '', nextOffset: null });
        expect(await readAll(v, artifactId)).toBe(content);
      });

      it('rejects bad arguments and unknown ids', async () => {
        const v = await vaultAt();
        const { artifactId } = await v.put({ content: 'abc' });
        await expect(v.page(artifactId, -1)).rejects.toBeInstanceOf(VaultArgumentError);
        await expect(v.page(artifactId, 0, 0)).rejects.toBeInstanceOf(VaultArgumentError);
        await expect(v.page(artifactId, 1.5)).rejects.toBeInstanceOf(VaultArgumentError);
        await expect(v.page('a_00000000000000000000000000000000')).rejects.toBeInstanceOf(ArtifactNotFoundError);
      });

      it('round-trips a 46,000-char artifact in 20,000-char pages', async () => {
        const v = await vaultAt();
        const content = Array.from({ length: 46_000 }, (_, i) =>
          i % 7 === 0 ? '😀' : String.fromCharCode(97 + (i % 26)),
        ).join('');
        const { artifactId, chars } = await v.put({ content });
        expect(chars).toBe(46_000);
        const offsets: (number | null)[] = [];
        let offset: number | null = 0;
        while (offset !== null) {
          offset = (await v.page(artifactId, offset, 1_000_000)).nextOffset;
          offsets.push(offset);
        }
        expect(offsets).toEqual([20_000, 40_000, null]);
        expect(await readAll(v, artifactId)).toBe(content);
      });
    });

    describe('peek', () => {
      it('shows head, tail and signal lines, and says it is lossy', async () => {
        const v = await vaultAt();
        const lines = Array.from({ length: 20 }, (_, i) => `line ${i + 1}`);
        lines[9] = 'ERROR: disk full';
        lines[10] = 'errors are not words here: terror';
        lines[11] = 'Traceback (most recent call last):';
        const { artifactId } = await v.put({ content: `${lines.join('\n')}\n`, toolName: 'terminal' });
        const peek = await v.peek(artifactId);
        expect(peek.synopsis.head).toEqual(lines.slice(0, 6));
        expect(peek.synopsis.tail).toEqual(lines.slice(-6));
        expect(peek.synopsis.signals).toEqual(['ERROR: disk full', 'Traceback (most recent call last):']);
        expect(peek).toMatchObject({
          lineCount: 20,
          lossy: true,
          exactRecovery: 'token_terminator action=artifact_get',
        });
        expect(peek.structure).toEqual({ type: 'text' });
        expect(await v.peek(artifactId)).toEqual(peek);
      });

      it('omits the tail for short artifacts and describes JSON shallowly', async () => {
        const v = await vaultAt();
        const obj = await v.put({ content: JSON.stringify({ b: 1, a: [1, 2], c: { d: 1 } }) });
        expect((await v.peek(obj.artifactId)).structure).toEqual({
          type: 'object',
          keys: ['b', 'a', 'c'],
          keyCount: 3,
          truncated: false,
        });
        expect((await v.peek(obj.artifactId)).synopsis.tail).toEqual([]);
        const arr = await v.put({ content: JSON.stringify([1, 'x', null, { a: 1 }, 2]) });
        expect((await v.peek(arr.artifactId)).structure).toEqual({
          type: 'array',
          items: 5,
          itemTypes: ['null', 'number', 'object', 'string'],
        });
        const big = Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`k${i}`, i]));
        const many = await v.peek((await v.put({ content: JSON.stringify(big) })).artifactId);
        expect(many.structure).toMatchObject({ keyCount: 60, truncated: true });
        expect((many.structure as { keys: string[] }).keys).toHaveLength(50);
      });

      it('falls back to a compact synopsis when the full one exceeds the limit', async () => {
        const v = await vaultAt();
        const long = Array.from({ length: 30 }, (_, i) => `error ${i} ${'x'.repeat(600)}`).join('\n');
        const { artifactId } = await v.put({ content: long });
        const wide = await v.peek(artifactId, 20_000);
        expect(wide.synopsis.head).toHaveLength(6);
        expect(wide.synopsis.signals).toHaveLength(8);
        expect([...wide.synopsis.head[0]!]).toHaveLength(500);
        const narrow = await v.peek(artifactId, 200);
        expect(narrow.synopsis.head).toHaveLength(3);
        expect(narrow.synopsis.signals).toHaveLength(3);
        expect(narrow.synopsis.head[0]!.endsWith('…')).toBe(true);
        expect([...narrow.synopsis.head[0]!]).toHaveLength(240);
      });
    });

    describe('find', () => {
      it('returns case-insensitive matching lines, 1-based, capped', async () => {
        const v = await vaultAt();
        const content = ['alpha', 'Beta FAILED', 'gamma', 'beta failed again', 'BETA'].join('\n');
        const { artifactId } = await v.put({ content });
        const found = await v.find(artifactId, 'beta');
        expect(found.matches).toEqual([
          { line: 2, text: 'Beta FAILED' },
          { line: 4, text: 'beta failed again' },
          { line: 5, text: 'BETA' },
        ]);
        expect(found).toMatchObject({ totalMatches: 3, truncated: false, lossy: true });
        expect(await v.find(artifactId, 'BETA', 2)).toMatchObject({ totalMatches: 3, truncated: true });
        expect((await v.find(artifactId, 'ÜBERGRÖSSE')).matches).toEqual([]);
        await expect(v.find(artifactId, '  ')).rejects.toBeInstanceOf(VaultArgumentError);
      });
    });

    describe('search', () => {
      it('is Unicode case-insensitive', async () => {
        const v = await vaultAt();
        const { artifactId } = await v.put({ content: 'Straße FEHLER Übergröße', toolName: 'terminal' });
        await v.put({ content: 'unrelated text' });
        for (const q of ['übergröße', 'ÜBERGRÖSSE', 'fehler', '  Straße  ', 'ße f']) {
          expect(
            (await v.search(q)).map((r) => r.artifactId),
            q,
          ).toEqual([artifactId]);
        }
        expect(await v.search('   ')).toEqual([]);
      });

      it('matches substrings, short queries and tool names', async () => {
        const v = await vaultAt();
        const a = await v.put({ content: 'compilation of module kysely', toolName: 'Search_Files' });
        const b = await v.put({ content: 'qz', toolName: 'terminal' });
        await v.put({ content: 'qz', toolName: 'process' });
        expect((await v.search('pilat')).map((r) => r.artifactId)).toEqual([a.artifactId]);
        expect((await v.search('QZ')).map((r) => r.artifactId)).toEqual([b.artifactId]);
        expect((await v.search('search_f')).map((r) => r.artifactId)).toEqual([a.artifactId]);
        expect((await v.search('PROCESS')).map((r) => r.artifactId)).toEqual([b.artifactId]);
        const [hit] = await v.search('kysely');
        expect(hit).toMatchObject({ chars: 28, toolName: 'Search_Files', observationCount: 1 });
        expect(Object.keys(hit!)).not.toContain('content');
      });

      it('never interprets the query as FTS or SQL syntax', async () => {
        const v = await vaultAt();
        const tricky = `he said "hi" * NEAR(a b) x OR y AND NOT z '; DROP TABLE artifacts; -- col:val ^start {a b} -x`;
        const { artifactId } = await v.put({ content: tricky });
        await v.put({ content: 'a plain artifact with or and near words' });
        const queries = [
          '"',
          '"hi"',
          '*',
          'NEAR(',
          'NEAR(a b)',
          'OR',
          'x OR y',
          "'; DROP TABLE artifacts; --",
          'col:val',
          '^start',
          '{a b}',
          '-x',
          'AND NOT',
        ];
        for (const q of queries) {
          expect(
            (await v.search(q)).map((r) => r.artifactId),
            q,
          ).toContain(artifactId);
        }
        expect(await v.search('NEAR(x y)')).toEqual([]);
        expect(await v.search('"a" OR "plain"')).toEqual([]);
        expect((await v.usage()).artifacts).toBe(2);
        expect((await v.page(artifactId)).content).toBe(tricky);
      });

      it('returns the newest first and at most maxSearchResults', async () => {
        const v = await vaultAt({ maxSearchResults: 3 });
        const ids = [];
        for (let i = 0; i < 5; i++) ids.push((await v.put({ content: `common needle ${i}` })).artifactId);
        expect((await v.search('needle', 100)).map((r) => r.artifactId)).toEqual(ids.reverse().slice(0, 3));
        expect(await v.search('needle', 1)).toHaveLength(1);
      });
    });

    describe('leases', () => {
      it('grants at most `limit` distinct requests inline, idempotently', async () => {
        const v = await vaultAt();
        const { artifactId: id } = await v.put({ content: 'evidence' });
        expect(await v.exposureAvailable('s', id, 'r1', 1)).toBe(true);
        expect(await v.claimExposure('s', id, 'r1', 1)).toBe(true);
        expect(await v.claimExposure('s', id, 'r1', 1)).toBe(true);
        expect(await v.exposureAvailable('s', id, 'r2', 1)).toBe(false);
        expect(await v.claimExposure('s', id, 'r2', 1)).toBe(false);
        expect(await v.claimExposure('other', id, 'r2', 1)).toBe(true);
        expect(await v.claimExposure('s', id, 'r9', 0)).toBe(false);
        const rows = await store
          .raw()
          .selectFrom('artifact_exposures')
          .select(['session_id', 'request_id', 'inline'])
          .orderBy('session_id')
          .orderBy('request_id')
          .execute();
        expect(rows).toEqual([
          { session_id: 'other', request_id: 'r2', inline: 1 },
          { session_id: 's', request_id: 'r1', inline: 1 },
        ]);
      });

      it('records delivered exposures with inline = max(old, new)', async () => {
        const v = await vaultAt();
        const { artifactId: id } = await v.put({ content: 'evidence' });
        await v.recordExposure('s', id, 'r3', false);
        expect(await v.exposureAvailable('s', id, 'r3', 5)).toBe(false);
        await v.recordExposure('s', id, 'r3', true);
        await v.recordExposure('s', id, 'r3', false);
        expect(await v.exposureAvailable('s', id, 'r3', 5)).toBe(true);
        expect(await v.exposureAvailable('s', id, 'r4', 1)).toBe(false);
        await expect(v.recordExposure('s', 'a_missing', 'r', true)).rejects.toBeInstanceOf(ArtifactNotFoundError);
        await expect(v.claimExposure('s', 'a_missing', 'r', 1)).rejects.toBeInstanceOf(ArtifactNotFoundError);
        await expect(v.claimExposure('s', id, 'r', -1)).rejects.toBeInstanceOf(VaultArgumentError);
      });
    });

    describe('baselines, renderings, metrics', () => {
      it('stores terminal baselines per state key', async () => {
        const v = await vaultAt();
        const a = await v.put({ content: 'first run' });
        const b = await v.put({ content: 'second run' });
        expect(await v.getBaseline('cwd|git status')).toBeUndefined();
        await v.setBaseline('cwd|git status', a.artifactId);
        await v.setBaseline('cwd|git status', b.artifactId);
        expect(await v.getBaseline('cwd|git status')).toMatchObject({
          stateKey: 'cwd|git status',
          artifactId: b.artifactId,
        });
        await expect(v.setBaseline('k', 'a_missing')).rejects.toBeInstanceOf(ArtifactNotFoundError);
      });

      it('keeps sticky renderings per session and key', async () => {
        const v = await vaultAt();
        await v.setRendering('s1', 'msg:3', 'receipt A');
        await v.setRendering('s2', 'msg:3', 'inline');
        expect(await v.getRendering('s1', 'msg:3')).toBe('receipt A');
        expect(await v.getRendering('s2', 'msg:3')).toBe('inline');
        expect(await v.getRendering('s1', 'msg:4')).toBeUndefined();
        await v.setRendering('s1', 'msg:3', 'receipt B');
        expect(await v.getRendering('s1', 'msg:3')).toBe('receipt B');
      });

      it('writes many renderings of a session at once with the rows one-by-one writes would leave', async () => {
        const v = await vaultAt();
        const entries: [string, string][] = [
          ...Array.from({ length: 450 }, (_, i): [string, string] => [`k${i}`, `value ${i} αβγ`]),
          ['k7', 'later value of k7'],
        ];
        const S = { tenant: 't1', sessionId: 's-batch' };
        await v.setRenderings('s-batch', entries, S);
        for (const [key, value] of entries)
          await v.setRendering('s-single', key, value, { ...S, sessionId: 's-single' });
        const rows = async (sessionId: string): Promise<[string, string][]> =>
          (
            await store
              .raw()
              .selectFrom('session_renderings')
              .select(['render_key', 'value'])
              .where('session_id', '=', sessionId)
              .orderBy('render_key')
              .execute()
          ).map((r) => [r.render_key, r.value]);
        const batch = await rows('s-batch');
        expect(batch).toHaveLength(450);
        expect(batch).toEqual(await rows('s-single'));
        expect(await v.getRendering('s-batch', 'k7')).toBe('later value of k7');
        // The session is touched (retention releases its renderings with it), once.
        expect(await v.sessionPins(S)).toMatchObject({ closed: false });
        // An existing key is updated; nothing at all is written for no entries.
        await v.setRenderings('s-batch', [['k1', 'new k1']], S);
        expect(await v.getRendering('s-batch', 'k1')).toBe('new k1');
        await v.setRenderings('s-none', [], { tenant: 't1', sessionId: 's-none' });
        expect(await v.sessionPins({ tenant: 't1', sessionId: 's-none' })).toBeUndefined();
      });

      it('upserts one content-free metric row per session and request', async () => {
        const v = await vaultAt();
        const base = {
          sessionId: 's',
          requestId: 'r1',
          mode: 'compile',
          rawChars: 100,
          finalChars: 60,
          receipts: 1,
          failedOpen: false,
        };
        await v.recordRequestMetric({
          ...base,
          components: { tool_results: { raw: 50, final: 10 }, instructions: { raw: 5, final: 5 } },
        });
        await v.recordRequestMetric({
          ...base,
          finalChars: 40,
          rawTokens: 30,
          finalTokens: 12,
          tokenizer: 'tiktoken:o200k_base',
          savedByStage: { compile: 60 },
          components: { tool_results: { raw: 50, final: 8 } },
        });
        const db = store.raw();
        const metrics = await db
          .selectFrom('request_metrics')
          .select(['final_chars', 'raw_tokens', 'tokenizer', 'saved_by_stage_json'])
          .execute();
        const components = await db
          .selectFrom('request_component_metrics')
          .select(['component', 'raw_tokens', 'final_tokens'])
          .execute();
        expect(metrics).toEqual([
          { final_chars: 40, raw_tokens: 30, tokenizer: 'tiktoken:o200k_base', saved_by_stage_json: '{"compile":60}' },
        ]);
        expect(components).toEqual([{ component: 'tool_results', raw_tokens: 50, final_tokens: 8 }]);
        await expect(v.recordRequestMetric({ ...base, rawChars: -1 })).rejects.toBeInstanceOf(VaultArgumentError);
      });

      it('writes a batch of metric rows as the same rows one call at a time would, a repeated request keeping the later row', async () => {
        const v = await vaultAt();
        const row = (
          requestId: string,
          finalChars: number,
          components: Record<string, { raw: number; final: number }>,
        ) => ({
          sessionId: 's',
          requestId,
          mode: 'balanced',
          rawChars: 100,
          finalChars,
          receipts: 0,
          failedOpen: false,
          components,
        });
        await v.recordRequestMetric(
          row('r0', 90, { history: { raw: 9, final: 9 }, tool_results: { raw: 1, final: 1 } }),
        );
        // More rows than one statement carries; r0 written before and r7 twice within the batch.
        const batch = Array.from({ length: 450 }, (_, i) => row(`r${i}`, i, { tool_results: { raw: 10, final: i } }));
        batch.push(row('r7', 77, { history: { raw: 3, final: 2 } }));
        await v.recordRequestMetrics(batch);
        await v.recordRequestMetrics([]);
        const db = store.raw();
        const metrics = await db.selectFrom('request_metrics').select(['request_id', 'final_chars']).execute();
        const components = await db
          .selectFrom('request_component_metrics')
          .select(['request_id', 'component', 'final_tokens'])
          .execute();
        expect(metrics).toHaveLength(450);
        expect(metrics.find((m) => m.request_id === 'r7')?.final_chars).toBe(77);
        expect(metrics.find((m) => m.request_id === 'r449')?.final_chars).toBe(449);
        expect(components).toHaveLength(450);
        expect(components.filter((c) => c.request_id === 'r0')).toEqual([
          { request_id: 'r0', component: 'tool_results', final_tokens: 0 },
        ]);
        expect(components.filter((c) => c.request_id === 'r7')).toEqual([
          { request_id: 'r7', component: 'history', final_tokens: 2 },
        ]);
        await expect(
          v.recordRequestMetrics([row('ok', 1, {}), { ...row('bad', 1, {}), rawChars: -1 }]),
        ).rejects.toBeInstanceOf(VaultArgumentError);
        expect(
          await db.selectFrom('request_metrics').select('request_id').where('request_id', '=', 'ok').execute(),
        ).toEqual([]);
      });

      it("reads the stage ids of rows written before they were unified as today's ids", async () => {
        const v = await vaultAt();
        const base = { mode: 'balanced', rawChars: 100, finalChars: 60, receipts: 0, failedOpen: false };
        await v.recordRequestMetric({
          ...base,
          sessionId: 'old',
          requestId: 'r1',
          savedByStage: { temporal_delta: 30, compress_tool_result: 10, rtk_rewrite: 1 },
        });
        await v.recordRequestMetric({
          ...base,
          sessionId: 'new',
          requestId: 'r1',
          savedByStage: { deltaRepeatedOutput: 5, compressToolResult: 2 },
        });
        expect((await v.metricsSummary()).saved_by_stage).toEqual({
          deltaRepeatedOutput: 35,
          compressToolResult: 12,
          rewriteTerminalCommand: 1,
        });
      });

      it('reads the newest metric rows back oldest first, an upsert keeping its place', async () => {
        let now = Date.parse('2030-01-01T00:00:00.000Z');
        const v = await vaultAt({ clock: () => (now += 1000) });
        const row = (sessionId: string, requestId: string, rawChars: number) => ({
          sessionId,
          requestId,
          mode: 'balanced',
          rawChars,
          finalChars: 10,
          receipts: 1,
          failedOpen: false,
        });
        await v.recordRequestMetric({
          ...row('s1', 'r1', 100),
          rawTokens: 30,
          finalTokens: 12,
          savedByStage: { compressToolResult: 90 },
        });
        await v.recordRequestMetric(row('s2', 'r1', 200));
        await v.recordRequestMetric({ ...row('s1', 'r2', 300), failedOpen: true });
        await v.recordRequestMetric({
          ...row('s1', 'r1', 150),
          rawTokens: 40,
          finalTokens: 12,
          savedByStage: { compress_tool_result: 140 },
        }); // an older id reads as today's
        expect(await v.requestMetricRows()).toEqual([
          {
            sessionId: 's1',
            requestId: 'r1',
            mode: 'balanced',
            rawChars: 150,
            finalChars: 10,
            rawTokens: 40,
            finalTokens: 12,
            receipts: 1,
            failedOpen: false,
            savedByStage: { compressToolResult: 140 },
          },
          {
            sessionId: 's2',
            requestId: 'r1',
            mode: 'balanced',
            rawChars: 200,
            finalChars: 10,
            receipts: 1,
            failedOpen: false,
            savedByStage: {},
          },
          {
            sessionId: 's1',
            requestId: 'r2',
            mode: 'balanced',
            rawChars: 300,
            finalChars: 10,
            receipts: 1,
            failedOpen: true,
            savedByStage: {},
          },
        ]);
        expect((await v.requestMetricRows(2)).map((r) => `${r.sessionId}/${r.requestId}`)).toEqual(['s2/r1', 's1/r2']);
        await expect(v.requestMetricRows(0)).rejects.toBeInstanceOf(VaultArgumentError);
      });
    });

    describe('capacity', () => {
      it('refuses an artifact over the per-artifact limit without writing', async () => {
        const v = await vaultAt({ maxArtifactChars: 10 });
        expect((await v.put({ content: '😀'.repeat(10) })).chars).toBe(10);
        await expect(v.put({ content: 'x'.repeat(11) })).rejects.toBeInstanceOf(VaultCapacityError);
        expect((await v.usage()).artifacts).toBe(1);
        expect(await v.search('xxx')).toEqual([]);
      });
    });

    describe('opening', () => {
      it('validates options with the API name in the message', async () => {
        await expect(createVault({ path: '' })).rejects.toBeInstanceOf(ConfigError);
        await expect(createVault({ url: 'mysql://x' })).rejects.toBeInstanceOf(ConfigError);
        await expect(createVault({ path: '/tmp/x.sqlite3', url: 'postgres://localhost/x' })).rejects.toThrow(
          /not both/,
        );
        await expect(vaultAt({ maxPageChars: 0 })).rejects.toThrow(/createVault: `maxPageChars`/);
        await expect(vaultAt({ highWaterPct: 101 })).rejects.toThrow(ConfigError);
        await expect(vaultAt({ busyTimeoutMs: 1.5 })).rejects.toThrow(ConfigError);
        await expect(vaultAt({ poolSize: 0 })).rejects.toThrow(/createVault: `poolSize`/);
      });

      it('records the schema version and runs every migration once', async () => {
        const v = await vaultAt();
        await v.put({ content: 'x' });
        expect(v.engine).toBe(dialect);
        const names = await store
          .raw()
          .selectFrom('kysely_migration' as never)
          .select('name' as never)
          .orderBy('name' as never)
          .execute();
        expect(names.map((r) => (r as { name: string }).name)).toEqual([
          '0001_initial',
          '0002_session_state',
          '0003_scoped_pins',
          '0004_token_counts',
        ]);
        await v.close();
        const again = await vaultAt();
        expect((await again.usage()).artifacts).toBe(1);
        expect(SCHEMA_VERSION).toBe(4);
      });

      it('keeps token counts per counter and digest, completing a row but never changing a count', async () => {
        const v = await vaultAt();
        const h = (n: number): string => createHash('sha256').update(`item ${n}`).digest('base64');
        await v.recordTokenCounts('tiktoken:o200k_base/2000', [
          { hash: h(1), compact: 120, mid: 125 },
          { hash: h(2), compact: 0 },
          { hash: h(2), alone: 7 }, // the same digest twice: both counts kept
        ]);
        await v.recordTokenCounts('tiktoken:cl100k_base/2000', [{ hash: h(1), compact: 999 }]);
        // A later write completes the row; the count it already had stays.
        await v.recordTokenCounts('tiktoken:o200k_base/2000', [{ hash: h(1), compact: 5, first: 121, last: 126 }]);
        const got = await v.tokenCounts('tiktoken:o200k_base/2000', [h(1), h(2), h(3), h(1)]);
        expect(Object.fromEntries(got)).toEqual({
          [h(1)]: { compact: 120, mid: 125, first: 121, last: 126 },
          [h(2)]: { compact: 0, alone: 7 },
        });
        expect((await v.tokenCounts('tiktoken:cl100k_base/2000', [h(1)])).get(h(1))).toEqual({ compact: 999 });
        expect((await v.tokenCounts('other', [h(1)])).size).toBe(0);
        expect((await v.tokenCounts('tiktoken:o200k_base/2000', [])).size).toBe(0);
        // More digests than one statement takes, both ways.
        const many = Array.from({ length: 950 }, (_, i) => ({ hash: h(100 + i), compact: i }));
        await v.recordTokenCounts('many', many);
        const back = await v.tokenCounts(
          'many',
          many.map((r) => r.hash),
        );
        expect(back.size).toBe(950);
        expect(many.every((r) => back.get(r.hash)?.compact === r.compact)).toBe(true);
        await v.close();
      });

      it('refuses bad token-count input with a VaultArgumentError and writes nothing of it', async () => {
        const v = await vaultAt();
        const ok = createHash('sha256').update('ok').digest('base64');
        for (const bad of [
          () => v.recordTokenCounts('', [{ hash: ok, compact: 1 }]),
          () => v.recordTokenCounts('c', [{ hash: 'not a digest', compact: 1 }]),
          () => v.recordTokenCounts('c', [{ hash: ok, compact: -1 }]),
          () => v.recordTokenCounts('c', [{ hash: ok, compact: 1.5 }]),
          () => v.tokenCounts('c', ['x']),
        ])
          await expect(bad()).rejects.toBeInstanceOf(VaultArgumentError);
        expect((await v.tokenCounts('c', [ok])).size).toBe(0);
        await v.close();
      });

      it('deletes token counts past their TTL when it next writes some', async () => {
        let now = Date.parse('2026-01-01T00:00:00Z');
        const v = await vaultAt({ clock: () => now });
        const h = (n: number): string => createHash('sha256').update(`old ${n}`).digest('base64');
        await v.recordTokenCounts('c', [{ hash: h(1), compact: 1 }]);
        now += COUNT_TTL_MS + 2 * 3600_000;
        await v.recordTokenCounts('c', [{ hash: h(2), compact: 2 }]);
        const got = await v.tokenCounts('c', [h(1), h(2)]);
        expect([...got.keys()]).toEqual([h(2)]);
        await v.close();
      });

      it('refuses a store with a newer schema version', async () => {
        const v = await vaultAt();
        await v.put({ content: 'kept' });
        await v.close();
        await store.setSchemaVersion(SCHEMA_VERSION + 1);
        const error = await vaultAt().catch((e: unknown) => e);
        expect(error).toBeInstanceOf(VaultSchemaError);
        expect((error as Error).message).toMatch(/newer than the supported/);
      });

      it('closes once and refuses work afterwards; asyncDispose closes', async () => {
        const v = await vaultAt();
        await v.close();
        await v.close();
        await expect(v.put({ content: 'late' })).rejects.toMatchObject({ code: 'E_VAULT_OPEN' });
        let disposed: Vault | undefined;
        {
          await using scoped = await createVault({ ...store.location });
          disposed = scoped;
          await scoped.put({ content: 'in scope' });
        }
        await expect(disposed.usage()).rejects.toMatchObject({ code: 'E_VAULT_OPEN' });
      });
    });
  });
}

// Issue 14: scoping (item 2), delivery as the commit point (item 1), pins that age out with their
// sessions (item 3) and bounded search (item 4), once per dialect.
for (const dialect of DIALECTS) {
  describe(`vault contract on ${dialect}: scopes, delivery, sessions, bounded search`, () => {
    let store: FreshStore;
    beforeEach(async () => {
      store = await freshStore(dialect, 'scoped.sqlite3');
    });
    afterEach(async () => {
      await store.cleanup();
    });
    const A = { tenant: 't1', sessionId: 'a' };
    const B = { tenant: 't1', sessionId: 'b' };
    const OTHER_TENANT = { tenant: 't2', sessionId: 'a' };
    const secret = 'deploy log\nAWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG\ndone\n';

    describe('scoping', () => {
      it('a session reads and searches only what it observed or was delivered', async () => {
        const v = await store.open();
        const { artifactId } = await v.put({ content: secret, toolName: 'terminal' }, A);
        await v.put({ content: 'session b output with AWS_SECRET mentioned nowhere else', toolName: 'terminal' }, B);
        for (const scope of [B, OTHER_TENANT, { tenant: 't2' }]) {
          const found = await v.search('AWS_SECRET_ACCESS', 50, scope);
          expect(
            found.map((r) => r.artifactId),
            JSON.stringify(scope),
          ).toEqual([]);
          await expect(v.page(artifactId, 0, 100, scope)).rejects.toBeInstanceOf(ArtifactNotFoundError);
          await expect(v.peek(artifactId, 1000, scope)).rejects.toBeInstanceOf(ArtifactNotFoundError);
          await expect(v.find(artifactId, 'AWS', 10, scope)).rejects.toBeInstanceOf(ArtifactNotFoundError);
          expect(await v.summary(artifactId, scope)).toBeUndefined();
          expect(await v.verify(artifactId, scope)).toBe(false);
        }
        expect((await v.search('AWS_SECRET_ACCESS', 50, A)).map((r) => r.artifactId)).toEqual([artifactId]);
        expect((await v.page(artifactId, 0, 100, A)).content).toBe(secret);
        expect((await v.find(artifactId, 'aws_secret', 10, A)).matches).toEqual([
          { line: 2, text: 'AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG' },
        ]);
        // The tenant as a whole (no session named) and an unscoped (trusted) caller see it.
        expect((await v.search('AWS_SECRET_ACCESS', 50, { tenant: 't1' })).map((r) => r.artifactId)).toEqual([
          artifactId,
        ]);
        expect((await v.search('AWS_SECRET_ACCESS')).map((r) => r.artifactId)).toEqual([artifactId]);
        // Short needles take the scan path: scoped the same way.
        expect(await v.search('wJ', 50, B)).toEqual([]);
        expect((await v.search('wJ', 50, A)).map((r) => r.artifactId)).toEqual([artifactId]);
      });

      it("a delivery in a scope never pins another tenant's artifact: it comes back missing and stays unreadable", async () => {
        const v = await store.open();
        const { artifactId } = await v.put({ content: secret, toolName: 'terminal' }, A);
        const d = await v.deliver([artifactId], OTHER_TENANT);
        expect(d.missing).toEqual([artifactId]);
        await expect(v.page(artifactId, 0, 100, OTHER_TENANT)).rejects.toBeInstanceOf(ArtifactNotFoundError);
        expect(await v.verify(artifactId, OTHER_TENANT)).toBe(false);
        expect(await v.search('aws_secret', 50, OTHER_TENANT)).toEqual([]);
        await v.pin([artifactId], { tenant: 't2', sessionId: 'z' });
        await expect(v.page(artifactId, 0, 100, { tenant: 't2', sessionId: 'z' })).rejects.toBeInstanceOf(
          ArtifactNotFoundError,
        );
        // The owning tenant's own sessions still take deliveries.
        expect((await v.deliver([artifactId], A)).missing).toEqual([]);
      });

      it('another session of the tenant reads an artifact once it was delivered to it; another tenant never', async () => {
        const v = await store.open();
        const { artifactId } = await v.put({ content: secret, toolName: 'terminal' }, A);
        expect((await v.deliver([artifactId], B)).missing).toEqual([]);
        expect((await v.page(artifactId, 0, 100, B)).content).toBe(secret);
        expect((await v.search('aws_secret', 50, B)).map((r) => r.artifactId)).toEqual([artifactId]);
        await expect(v.page(artifactId, 0, 100, OTHER_TENANT)).rejects.toBeInstanceOf(ArtifactNotFoundError);
        // The same content observed by another tenant's session (dedup) gives that session access, and only it.
        await v.put({ content: secret, toolName: 'terminal' }, OTHER_TENANT);
        expect((await v.page(artifactId, 0, 100, OTHER_TENANT)).content).toBe(secret);
        await expect(v.page(artifactId, 0, 100, { tenant: 't2', sessionId: 'z' })).rejects.toBeInstanceOf(
          ArtifactNotFoundError,
        );
      });
    });

    describe('delivery', () => {
      it('pins for the session in one transaction and reports what is gone or damaged', async () => {
        const v = await store.open();
        const kept = await v.put({ content: 'kept evidence', toolName: 'terminal' }, A);
        const damaged = await v.put({ content: 'damaged evidence', toolName: 'terminal' }, A);
        await store
          .raw()
          .updateTable('artifacts')
          .set({ content: store.encode('tampered evidence') })
          .where('artifact_id', '=', damaged.artifactId)
          .execute();
        const d = await v.deliver([kept.artifactId, damaged.artifactId, 'a_00000000000000000000000000000000'], A);
        expect([...d.missing].sort()).toEqual([damaged.artifactId, 'a_00000000000000000000000000000000'].sort());
        const pins = await store
          .raw()
          .selectFrom('artifact_access')
          .select(['tenant', 'session_id', 'artifact_id', 'pinned'])
          .where('pinned', '=', 1)
          .execute();
        expect(pins).toEqual([{ tenant: 't1', session_id: 'a', artifact_id: kept.artifactId, pinned: 1 }]);
        expect(await v.sessionPins(A)).toMatchObject({ epoch: d.epoch, closed: false });
        expect((await v.deliver([kept.artifactId], A)).epoch).toBe(d.epoch);
      });

      it('given the content and digest a caller put, delivery and verify compare them and still find a same-length tamper', async () => {
        const v = await store.open();
        const keptText = 'kept evidence';
        const damagedText = 'damaged evidence';
        const kept = await v.put({ content: keptText, toolName: 'terminal' }, A);
        const damaged = await v.put({ content: damagedText, toolName: 'terminal' }, A);
        const known = new Map([
          [kept.artifactId, { content: keptText, sha256: kept.sha256 }],
          [damaged.artifactId, { content: damagedText, sha256: damaged.sha256 }],
        ]);
        expect(await v.verify(damaged.artifactId, A, known.get(damaged.artifactId))).toBe(true);
        await store
          .raw()
          .updateTable('artifacts')
          .set({ content: store.encode('tampered evidence'.slice(1)) }) // as long as the original
          .where('artifact_id', '=', damaged.artifactId)
          .execute();
        const d = await v.deliver([kept.artifactId, damaged.artifactId], A, known);
        expect([...d.missing]).toEqual([damaged.artifactId]);
        expect(await v.verify(kept.artifactId, A, known.get(kept.artifactId))).toBe(true);
        expect(await v.verify(damaged.artifactId, A, known.get(damaged.artifactId))).toBe(false);
        // A known content that is not the row's (a caller's wrong claim) is refused, not trusted.
        const wrong = { content: 'kept evidenc!', sha256: kept.sha256 };
        expect(await v.verify(kept.artifactId, A, wrong)).toBe(false);
        expect((await v.deliver([kept.artifactId], A, new Map([[kept.artifactId, wrong]]))).missing).toEqual([
          kept.artifactId,
        ]);
      });

      it('a write of a closed session keeps its epoch, opens it again and moves its last-seen time forward', async () => {
        let now = Date.parse('2026-01-01T00:00:00.000Z');
        const v = await store.open({ clock: () => now });
        const { epoch } = await v.deliver([], A);
        await v.closeSession(A);
        expect(await v.sessionPins(A)).toMatchObject({ epoch, closed: true });
        now += 60_000;
        await v.setRendering('a', 'k', 'v', A);
        expect(await v.sessionPins(A)).toEqual({ epoch, closed: false, lastSeenMs: now });
        await v.closeSession(A);
        now += 60_000;
        expect(await v.deliver([], A)).toMatchObject({ epoch });
        expect(await v.sessionPins(A)).toEqual({ epoch, closed: false, lastSeenMs: now });
      });

      it('an artifact pruned between its put and its delivery comes back missing; a delivered one survives pressure', async () => {
        const v = await store.open({ maxBytes: 1000, highWaterPct: 90, lowWaterPct: 50 });
        const early = await v.put({ content: 'e'.repeat(300) }, A);
        const delivered = await v.put({ content: 'd'.repeat(300) }, A);
        expect((await v.deliver([delivered.artifactId], A)).missing).toEqual([]);
        for (let i = 0; i < 4; i++) await v.put({ content: `${i}`.repeat(250) }, B); // another session's puts prune
        expect((await v.deliver([early.artifactId], A)).missing).toEqual([early.artifactId]);
        expect((await v.page(delivered.artifactId, 0, 1000, A)).content).toBe('d'.repeat(300));
      });
    });

    describe('sessions', () => {
      it('a closed or idle session releases its pins, leases and renderings to retention; a live one does not', async () => {
        let now = Date.parse('2030-01-01T00:00:00Z');
        const v = await store.open({
          maxBytes: 1000,
          highWaterPct: 90,
          lowWaterPct: 50,
          sessionTtlMs: 60_000,
          clock: () => now,
        });
        const live = await v.put({ content: 'L'.repeat(300) }, A);
        const closed = await v.put({ content: 'C'.repeat(300) }, B);
        const idle = await v.put({ content: 'I'.repeat(200) }, { tenant: 't1', sessionId: 'idle' });
        await v.deliver([live.artifactId], A);
        await v.deliver([closed.artifactId], B);
        await v.deliver([idle.artifactId], { tenant: 't1', sessionId: 'idle' });
        await v.setRendering('b', 'k', 'rendering of b', B);
        expect(await v.claimExposure('b', closed.artifactId, 'r1', 1, B)).toBe(true);
        const epochB = (await v.sessionPins(B))!.epoch;
        await v.closeSession(B);
        expect(await v.sessionPins(B)).toMatchObject({ closed: true });
        now += 30_000;
        await v.deliver([live.artifactId], A); // A stays alive; 'idle' is not seen again
        now += 40_000; // 'idle' is now 70 s idle, A 40 s
        await expect(v.put({ content: 'x'.repeat(400) }, A)).resolves.toMatchObject({ created: true });
        expect((await v.page(live.artifactId, 0, 1000, A)).content).toBe('L'.repeat(300));
        await expect(v.page(closed.artifactId, 0, 1000, B)).rejects.toBeInstanceOf(ArtifactNotFoundError);
        await expect(v.page(idle.artifactId)).rejects.toBeInstanceOf(ArtifactNotFoundError);
        expect(await v.sessionPins(B)).toBeUndefined();
        expect(await v.getRendering('b', 'k')).toBeUndefined();
        expect(await store.raw().selectFrom('artifact_exposures').selectAll().execute()).toEqual([]);
        // B comes back: a new epoch tells its memo that everything must be delivered again.
        expect((await v.deliver([], B)).epoch).not.toBe(epochB);
      });

      // The property of issue 14 item 3: many sessions on a bounded vault never lose a receipt while
      // they live, and capacity is only ever refused when live sessions really hold it.
      it('many sessions on a bounded vault: no delivered receipt lost while its session lives, capacity never exhausted for good', async () => {
        const CAP = 6000;
        const TTL = 1000;
        const command = fc.oneof(
          fc.record({
            kind: fc.constant('deliver' as const),
            session: fc.integer({ min: 0, max: 5 }),
            bytes: fc.integer({ min: 100, max: 900 }),
          }),
          fc.record({ kind: fc.constant('close' as const), session: fc.integer({ min: 0, max: 5 }) }),
          fc.record({ kind: fc.constant('wait' as const), ms: fc.integer({ min: 100, max: 1500 }) }),
          fc.record({ kind: fc.constant('filler' as const), bytes: fc.integer({ min: 100, max: 900 }) }),
        );
        let round = 0;
        await fc.assert(
          fc.asyncProperty(fc.array(command, { minLength: 10, maxLength: 40 }), async (commands) => {
            const s = await freshStore(dialect, `prop-${round++}.sqlite3`);
            let now = Date.parse('2030-01-01T00:00:00Z');
            try {
              const v = await s.open({
                maxBytes: CAP,
                highWaterPct: 90,
                lowWaterPct: 70,
                sessionTtlMs: TTL,
                clock: () => now,
              });
              /** Model: per session, when it was last seen, whether it is closed, what it was delivered (id → bytes). */
              const sessions = new Map<number, { seen: number; closed: boolean; delivered: Map<string, number> }>();
              const live = (k: number): boolean => {
                const m = sessions.get(k);
                return m !== undefined && !m.closed && m.seen >= now - TTL;
              };
              let n = 0;
              for (const c of commands) {
                now += 1;
                if (c.kind === 'wait') now += c.ms;
                else if (c.kind === 'close') {
                  const m = sessions.get(c.session);
                  if (m !== undefined) {
                    await v.closeSession({ tenant: 't', sessionId: `s${c.session}` });
                    m.closed = true;
                  }
                } else {
                  const who = c.kind === 'deliver' ? c.session : undefined;
                  const scope = who === undefined ? undefined : { tenant: 't', sessionId: `s${who}` };
                  const livePinned = new Map<string, number>();
                  for (const [k, m] of sessions) if (live(k)) for (const [id, b] of m.delivered) livePinned.set(id, b);
                  const held = [...livePinned.values()].reduce((a, b) => a + b, 0);
                  const content = `${n++}:`.padEnd(c.bytes, 'z');
                  let put;
                  try {
                    put = await v.put({ content }, scope);
                  } catch (error) {
                    expect(error).toBeInstanceOf(VaultCapacityError);
                    // Refused only when what live sessions hold leaves no room for it.
                    expect(held + c.bytes, 'capacity refused while not held by live sessions').toBeGreaterThan(CAP);
                    continue;
                  }
                  if (who !== undefined && scope !== undefined) {
                    const d = await v.deliver([put.artifactId], scope);
                    expect(d.missing).toEqual([]);
                    const m = sessions.get(who) ?? { seen: now, closed: false, delivered: new Map<string, number>() };
                    if (!live(who)) m.delivered = new Map(); // its earlier pins may have been released
                    m.seen = now;
                    m.closed = false;
                    m.delivered.set(put.artifactId, c.bytes);
                    sessions.set(who, m);
                  }
                }
                for (const [k, m] of sessions) {
                  if (!live(k)) continue;
                  for (const id of m.delivered.keys()) {
                    const page = await v.page(id, 0, 1000, { tenant: 't', sessionId: `s${k}` }).catch(() => undefined);
                    expect(page?.artifactId, `session s${k} lost ${id} while live`).toBe(id);
                  }
                }
              }
            } finally {
              await s.cleanup();
            }
          }),
          { numRuns: dialect === 'sqlite' ? 25 : 10, seed: 14_003 },
        );
      });
    });

    describe('bounded search', () => {
      it('a needle longer than the index phrase is matched exactly (candidates are checked)', async () => {
        const v = await store.open();
        const head = 'the same first twenty-four';
        const hit = await v.put({ content: `xx ${head} and then the real tail yy` });
        await v.put({ content: `xx ${head} but another tail yy` });
        expect((await v.search(`${head} and then the real tail`)).map((r) => r.artifactId)).toEqual([hit.artifactId]);
        expect(await v.search(`${head} and then a tail nobody wrote`)).toEqual([]);
      });

      it('refuses a query longer than its limit, and says partial when the deadline cut the search short', async () => {
        let now = 0;
        const v = await store.open({ searchDeadlineMs: 1000, clock: () => (now += 1000) });
        for (let i = 0; i < 6; i++) await v.put({ content: `row ${i} with a needle qq in it` });
        await expect(v.search('q'.repeat(2001))).rejects.toBeInstanceOf(VaultArgumentError);
        const cut = await v.search('qq', 50);
        expect(cut.partial).toBe(true);
        expect(cut.length).toBeLessThan(6);
        const calm = await store.open({ searchDeadlineMs: 1000, clock: () => 0 });
        const whole = await calm.search('qq', 50);
        expect(whole.partial).toBe(false);
        expect(whole).toHaveLength(6);
        expect(JSON.stringify(whole)).not.toContain('partial'); // the flag stays off the plain data
      });
    });
  });
}
