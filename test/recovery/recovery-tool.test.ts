import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fc, test } from '@fast-check/vitest';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import type { Config } from '../../src/config/types.js';
import {
  createRecoveryTool,
  RECOVERY_ACTIONS,
  type RecoveryToolHandle,
  type WorkingStateStore,
} from '../../src/recovery/index.js';
import { anyText } from '../../src/testing/index.js';
import { createVault } from '../../src/vault/index.js';
import type { Vault } from '../../src/vault/types.js';

const HOST = { sessionId: 'host-session' };
let dir: string;
let vault: Vault;
let config: Config;
let tool: RecoveryToolHandle;

const configFor = (overrides: Parameters<typeof loadConfig>[0] = {}): Config =>
  loadConfig({
    env: { HOME: dir, ...overrides.env },
    overrides: { dbPath: join(dir, 'vault.sqlite3'), ...overrides.overrides },
  });

async function call(args: unknown, t: RecoveryToolHandle = tool): Promise<Record<string, any>> {
  const text = await t.handle(args, HOST);
  expect(typeof text).toBe('string');
  return JSON.parse(text) as Record<string, any>;
}

/** Page through artifact_get the way the description tells a model to. */
async function reassemble(id: string, limit: number): Promise<{ content: string; pages: number }> {
  let content = '';
  let offset: number | null = 0;
  let pages = 0;
  while (offset !== null) {
    const page = await call({ action: 'artifact_get', artifact_id: id, offset, limit });
    expect(page.error).toBeUndefined();
    expect(page.offset).toBe(offset);
    content += page.content;
    offset = page.next_offset;
    pages += 1;
  }
  return { content, pages };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tt-recovery-'));
  config = configFor();
  vault = await createVault({
    path: config.dbPath,
    maxPageChars: config.maxPageChars,
    maxSearchResults: config.maxSearchResults,
  });
  tool = createRecoveryTool({ vault, config });
});

afterAll(async () => {
  await vault.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('recovery tool: exact paging (real vault)', () => {
  test.prop([anyText({ minLength: 1, maxLength: 300 }), fc.integer({ min: 1, max: 64 })], { numRuns: 60 })(
    'reassembles any Unicode string exactly from artifact_get pages',
    async (content, limit) => {
      const { artifactId, chars } = await vault.put({ sessionId: HOST.sessionId, content, toolName: 'terminal' });
      const { content: back, pages } = await reassemble(artifactId, limit);
      expect(back).toBe(content);
      expect(pages).toBe(Math.max(1, Math.ceil(chars / limit)));
    },
  );

  it('pages a 46,000-char artifact with astral characters in 20,000-char pages', async () => {
    const content = `${'𝄞a😀'.repeat(15_000)}end\n${'z'.repeat(996)}`;
    const { artifactId, chars } = await vault.put({ sessionId: HOST.sessionId, content, toolName: 'read_file' });
    expect(chars).toBe(46_000);
    const { content: back, pages } = await reassemble(artifactId, 50_000);
    expect(pages).toBe(3);
    expect(back).toBe(content);
  });

  it('returns the documented snake_case keys, sorted', async () => {
    const { artifactId, sha256 } = await vault.put({
      sessionId: HOST.sessionId,
      content: 'abc\ndef',
      toolName: 'search_files',
    });
    const text = await tool.handle({ action: 'artifact_get', artifact_id: artifactId }, HOST);
    const page = JSON.parse(text) as Record<string, unknown>;
    expect(page).toEqual({
      artifact_id: artifactId,
      content: 'abc\ndef',
      offset: 0,
      next_offset: null,
      total_chars: 7,
      sha256,
      tool_name: 'search_files',
    });
    expect(Object.keys(page)).toEqual(Object.keys(page).sort());
    expect(text).not.toContain('\n  ');
  });
});

describe('recovery tool: session and schema', () => {
  it('drops a model-supplied session_id and keeps working', async () => {
    const { artifactId } = await vault.put({ sessionId: HOST.sessionId, content: 'spoof check', toolName: 'terminal' });
    const page = await call({ action: 'artifact_get', artifact_id: artifactId, session_id: 'model-spoofed' });
    expect(page.content).toBe('spoof check');
  });

  it('passes only the host session to the working-state store', async () => {
    const seen: string[] = [];
    const store: WorkingStateStore = {
      apply: async (sessionId, operations) => {
        seen.push(sessionId);
        return { accepted: operations.length };
      },
      get: async () => ({ nodes: {}, edges: {} }),
    };
    const enabled = createRecoveryTool({
      vault,
      config: configFor({ overrides: { workingGraphChars: 500 } }),
      workingState: store,
    });
    const result = await call(
      {
        action: 'working_state_apply',
        operations: [{ op: 'NODE_CREATE', node_id: 'n1' }],
        session_id: 'model-spoofed',
      },
      enabled,
    );
    expect(result).toEqual({ accepted: 1 });
    expect(seen).toEqual(['host-session']);
  });

  it('rejects an unknown scope as bad configuration', () => {
    expect(() => createRecoveryTool({ vault, config, scope: 'tenant' as 'store' })).toThrow(
      expect.objectContaining({ name: 'ConfigError', code: 'E_CONFIG', message: expect.stringMatching(/scope/) }),
    );
  });

  it('exports a JSON Schema without session_id and with additionalProperties false', () => {
    const schema = tool.parameters as Record<string, any>;
    expect(tool.name).toBe('token_terminator');
    expect(schema.type).toBe('object');
    expect(schema.additionalProperties).toBe(false);
    expect(schema.required).toEqual(['action']);
    expect(Object.keys(schema.properties).sort()).toEqual(
      ['action', 'artifact_id', 'include_retired', 'limit', 'offset', 'operations', 'query'].sort(),
    );
    expect(schema.properties.action.enum).toEqual([...RECOVERY_ACTIONS]);
    expect(schema.properties.offset).toMatchObject({ type: 'integer', minimum: 0 });
    expect(schema.properties.limit).toMatchObject({ type: 'integer', minimum: 1 });
    expect(schema.properties.operations).toMatchObject({ type: 'array', maxItems: 100 });
    expect(JSON.stringify(schema)).not.toContain('session');
    expect(schema.$schema).toBeUndefined();
  });

  it('tells the model that recovered output is untrusted and how to page', () => {
    expect(tool.description).toMatch(/untrusted/);
    expect(tool.description).toMatch(/next_offset/);
  });

  it.each([
    [{ action: 'artifact_get', artifact_id: 'a_x', offset: -1 }, 'offset', 'offset must be an integer ≥ 0'],
    [{ action: 'artifact_get', artifact_id: 'a_x', offset: 1.5 }, 'offset', 'offset must be an integer ≥ 0'],
    [{ action: 'artifact_get', artifact_id: 'a_x', limit: 0 }, 'limit', 'limit must be an integer ≥ 1'],
    [{ action: 'artifact_get', artifact_id: 'a_x', limit: '10' }, 'limit', 'limit must be an integer ≥ 1'],
    [{ action: 'explode' }, 'action', 'action must be one of status, artifact_get'],
    [{}, 'action', 'action must be one of'],
    [{ action: 'artifact_get' }, 'artifact_id', 'artifact_id is required for action artifact_get'],
    [{ action: 'artifact_peek', artifact_id: '' }, 'artifact_id', 'artifact_id must not be empty'],
    [{ action: 'artifact_find', artifact_id: 'a_x', query: '   ' }, 'query', 'query must not be empty'],
    [{ action: 'artifact_search' }, 'query', 'query is required for action artifact_search'],
    [{ action: 'status', include_retired: 'yes' }, 'include_retired', 'include_retired must be a boolean'],
    [{ action: 'status', operations: Array.from({ length: 101 }, () => ({})) }, 'operations', 'at most 100'],
    ['not json', 'arguments', 'arguments must be a JSON object'],
    [null, 'arguments', 'arguments must be a JSON object'],
    [[1, 2], 'arguments', 'arguments must be a JSON object'],
  ])('rejects %j with an error naming %s', async (args, field, message) => {
    const result = await call(args);
    expect(result.error.code).toBe('E_INVALID_ARGUMENTS');
    expect(result.error.field).toBe(field);
    expect(result.error.message).toContain(message);
  });

  it('accepts arguments given as a JSON string', async () => {
    const { artifactId } = await vault.put({ sessionId: HOST.sessionId, content: 'as a string', toolName: 'terminal' });
    const page = await call(JSON.stringify({ action: 'artifact_get', artifact_id: artifactId }));
    expect(page.content).toBe('as a string');
  });

  it('clamps a large limit to the page ceiling', async () => {
    const small = createRecoveryTool({ vault, config: configFor({ overrides: { maxPageChars: 10 } }) });
    const { artifactId } = await vault.put({
      sessionId: HOST.sessionId,
      content: '0123456789abcdef',
      toolName: 'terminal',
    });
    const page = await call({ action: 'artifact_get', artifact_id: artifactId, limit: 1000 }, small);
    expect(page.content).toBe('0123456789');
    expect(page.next_offset).toBe(10);
  });
});

describe('recovery tool: other actions', () => {
  it('answers an unknown artifact with E_ARTIFACT_NOT_FOUND, not an exception', async () => {
    for (const action of ['artifact_get', 'artifact_peek', 'artifact_find']) {
      const result = await call({ action, artifact_id: `a_${'0'.repeat(32)}`, query: 'x' });
      expect(result.error.code).toBe('E_ARTIFACT_NOT_FOUND');
      expect(result.error.message).toContain(`a_${'0'.repeat(32)}`);
    }
  });

  it('peeks with a lossy synopsis in snake_case', async () => {
    const content = JSON.stringify({ alpha: 1, betaGamma: [1, 2], error: 'none' });
    const { artifactId } = await vault.put({ sessionId: HOST.sessionId, content, toolName: 'process' });
    const peek = await call({ action: 'artifact_peek', artifact_id: artifactId });
    expect(peek).toMatchObject({
      artifact_id: artifactId,
      tool_name: 'process',
      total_chars: content.length,
      lossy: true,
      exact_recovery: 'token_terminator action=artifact_get',
      structure: { type: 'object', key_count: 3, keys: ['alpha', 'betaGamma', 'error'] },
    });
    expect(peek.synopsis.head).toEqual([content]);
  });

  it('finds matching lines inside one artifact', async () => {
    const { artifactId } = await vault.put({
      sessionId: HOST.sessionId,
      content: 'ok\nFATAL: disk full\nok\nfatal again',
      toolName: 'terminal',
    });
    const found = await call({ action: 'artifact_find', artifact_id: artifactId, query: 'fatal' });
    expect(found.matches).toEqual([
      { line: 2, text: 'FATAL: disk full' },
      { line: 4, text: 'fatal again' },
    ]);
    expect(found).toMatchObject({ total_matches: 2, truncated: false, lossy: true });
  });

  it('searches by content and returns summaries without content', async () => {
    const { artifactId } = await vault.put({
      sessionId: HOST.sessionId,
      content: 'the quick zebrafish jumps',
      toolName: 'search_files',
    });
    const found = await call({ action: 'artifact_search', query: 'zebrafish' });
    expect(found.results.map((r: { artifact_id: string }) => r.artifact_id)).toContain(artifactId);
    expect(JSON.stringify(found)).not.toContain('quick');
  });

  it('reports status, merged with host extras', async () => {
    const withExtras = createRecoveryTool({ vault, config, status: async () => ({ recovery_reads: 3 }) });
    const status = await call({ action: 'status' }, withExtras);
    expect(status).toMatchObject({
      plugin: 'token-terminator',
      mode: 'balanced',
      enabled: true,
      vault_available: true,
      vault_error: null,
      recovery_reads: 3,
      limits: { max_page_chars: 20000, max_search_results: 50 },
    });
    expect(status.vault.artifacts).toBeGreaterThan(0);
  });

  it('reports terminal_rewrite only when an rtk binary is really there', async () => {
    const fakeRtk = join(dir, 'rtk');
    writeFileSync(fakeRtk, '#!/bin/sh\nexit 0\n');
    chmodSync(fakeRtk, 0o755);
    const emptyBin = mkdtempSync(join(dir, 'bin-'));
    vi.stubEnv('PATH', emptyBin);
    try {
      const statusWith = async (rtkPath: string) =>
        (await call({ action: 'status' }, createRecoveryTool({ vault, config: configFor({ overrides: { rtkPath } }) })))
          .profile;
      expect(await statusWith('')).toMatchObject({ terminal_rewrite: false });
      expect(await statusWith(join(dir, 'no-such-rtk'))).toMatchObject({ terminal_rewrite: false });
      expect(await statusWith(fakeRtk)).toMatchObject({ terminal_rewrite: true });
      vi.stubEnv('PATH', dir);
      expect(await statusWith('')).toMatchObject({ terminal_rewrite: true });
      const native = createRecoveryTool({
        vault,
        config: configFor({ overrides: { rtkPath: fakeRtk, mode: 'native' } }),
      });
      expect((await call({ action: 'status' }, native)).profile).toMatchObject({ terminal_rewrite: false });
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it('says working state is disabled by default', async () => {
    for (const action of ['working_state_apply', 'working_state_get']) {
      const result = await call({ action, operations: [] });
      expect(result.error.code).toBe('E_WORKING_STATE_DISABLED');
      expect(result.error.message).toContain('TOKEN_TERMINATOR_WORKING_GRAPH_CHARS');
    }
  });

  it('reports status without throwing when the vault is closed, and errors for reads', async () => {
    const own = await createVault({ path: join(dir, 'closed.sqlite3') });
    const { artifactId } = await own.put({ content: 'soon gone', toolName: 'terminal' });
    const closed = createRecoveryTool({ vault: own, config });
    await own.close();
    const status = await call({ action: 'status' }, closed);
    expect(status.vault_available).toBe(false);
    expect(typeof status.vault_error).toBe('string');
    const page = await call({ action: 'artifact_get', artifact_id: artifactId }, closed);
    expect(typeof page.error.code).toBe('string');
  });

  it('reports each call to onCall without content', async () => {
    const calls: [string, boolean][] = [];
    const observed = createRecoveryTool({ vault, config, onCall: (action, ok) => calls.push([action, ok]) });
    await observed.handle({ action: 'status' }, HOST);
    await observed.handle({ action: 'nope' }, HOST);
    await observed.handle({ action: 'artifact_get', artifact_id: 'a_missing' }, HOST);
    expect(calls).toEqual([
      ['status', true],
      ['invalid', false],
      ['artifact_get', false],
    ]);
  });
});
