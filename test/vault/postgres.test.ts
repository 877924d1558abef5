/**
 * PostgreSQL-only behaviour: TLS options pass through to `pg`, exact bytes (NUL included) and the
 * NUL-aware search, the password never shown, the configuration variable, and the working-state
 * and ledger stores in the same database.
 */
import pg from 'pg';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { ConfigError } from '../../src/errors.js';
import { openLedger } from '../../src/telemetry/ledger.js';
import { createVault, vaultOptionsFromConfig, type Vault } from '../../src/vault/index.js';
import { freshSchema } from '../support/postgres.js';

const drops: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const d of drops.splice(0)) await d();
});
async function schemaUrl(): Promise<string> {
  const s = await freshSchema(inject('pgUrl'), 'pgonly');
  drops.push(s.drop);
  return s.url;
}
/** Whether the vault's own connections use TLS: pg_stat_ssl of the application name its URL carries. */
async function vaultUsesTls(vault: Vault, url: string, app: string): Promise<boolean> {
  await vault.usage();
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const r = await c.query<{ ssl: boolean }>(
      'SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a ON a.pid = s.pid WHERE a.application_name = $1',
      [app],
    );
    expect(r.rows.length).toBeGreaterThan(0);
    return r.rows.every((row) => row.ssl);
  } finally {
    await c.end();
  }
}

describe.skipIf(inject('pgUrl') === '')('PostgreSQL vault', () => {
  it('passes TLS options through: sslmode in the URL, or the ssl option (the test server has ssl = on)', async () => {
    const url = await schemaUrl();
    const probe = new pg.Client({ connectionString: url });
    await probe.connect();
    const ssl = (await probe.query<{ ssl: string }>('SHOW ssl')).rows[0]?.ssl;
    await probe.end();
    expect(ssl, 'the PostgreSQL test server must run with ssl = on (test/support/postgres.ts does)').toBe('on');
    // Each vault's URL names its own application, so other test files' connections never count.
    const named = (app: string, sslmode?: string): string => {
      const u = new URL(url);
      u.searchParams.set('application_name', app);
      if (sslmode !== undefined) u.searchParams.set('sslmode', sslmode);
      return u.toString();
    };
    const tag = Math.random().toString(36).slice(2, 8);
    await using viaUrl = await createVault({ url: named(`tls-url-${tag}`, 'no-verify') });
    expect(await vaultUsesTls(viaUrl, url, `tls-url-${tag}`)).toBe(true);
    await using viaOption = await createVault({ url: named(`tls-opt-${tag}`), ssl: { rejectUnauthorized: false } });
    expect(await vaultUsesTls(viaOption, url, `tls-opt-${tag}`)).toBe(true);
    await using withoutTls = await createVault({ url: named(`tls-off-${tag}`, 'disable') });
    expect(await vaultUsesTls(withoutTls, url, `tls-off-${tag}`)).toBe(false);
  });

  it('stores exact bytes (NUL included) and searches NUL-aware', async () => {
    await using v = await createVault({ url: await schemaUrl() });
    const withNul = await v.put({ content: 'left\u0000right 😀', toolName: 'term\u0000inal' });
    const lookalike = await v.put({ content: 'left\ufffdright' });
    expect((await v.page(withNul.artifactId)).content).toBe('left\u0000right 😀');
    expect(await v.verify(withNul.artifactId)).toBe(true);
    expect((await v.search('T\u0000R')).map((r) => r.artifactId)).toEqual([withNul.artifactId]);
    expect((await v.search('left\ufffdright')).map((r) => r.artifactId)).toEqual([lookalike.artifactId]);
    expect((await v.search('LEFT')).map((r) => r.artifactId).sort()).toEqual(
      [withNul.artifactId, lookalike.artifactId].sort(),
    );
    expect(await v.search('50%_\\')).toEqual([]);
    const pct = await v.put({ content: 'done 50%_\\ of it' });
    expect((await v.search('50%_\\')).map((r) => r.artifactId)).toEqual([pct.artifactId]);
  });

  it('never shows the password: status path, configuration errors', async () => {
    const u = new URL(inject('pgUrl'));
    u.password = 's3cret-pw';
    await using v = await createVault({ url: u.toString() }).catch(() => createVault({ url: inject('pgUrl') }));
    expect(v.path).not.toContain('s3cret-pw');
    expect(v.engine).toBe('postgres');
    const bad = (() => {
      try {
        loadConfig({ env: { TOKEN_TERMINATOR_DB_URL: 'mysql://user:s3cret-pw@host/db' } });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(bad).toBeInstanceOf(ConfigError);
    expect((bad as Error).message).toMatch(/TOKEN_TERMINATOR_DB_URL/);
    expect((bad as Error).message).not.toContain('s3cret-pw');
    const config = loadConfig({
      env: { TOKEN_TERMINATOR_DB_URL: inject('pgUrl'), TOKEN_TERMINATOR_DB_POOL_SIZE: '3' },
    });
    expect(vaultOptionsFromConfig(config)).toMatchObject({ url: inject('pgUrl'), poolSize: 3 });
    expect(vaultOptionsFromConfig(config)).not.toHaveProperty('path');
  });

  it('keeps working state and the experiment ledger in the same database', async () => {
    const url = await schemaUrl();
    await using v = await createVault({ url, workingState: { maxNodes: 1 } });
    expect(await v.workingState.apply('s', [{ op: 'NODE_CREATE', node_id: 'a', kind: 'fact' }])).toMatchObject({
      accepted: 1,
    });
    await expect(v.workingState.apply('s', [{ op: 'NODE_CREATE', node_id: 'b', kind: 'fact' }])).rejects.toMatchObject({
      code: 'E_WORKING_STATE_INVALID',
    });
    expect(
      Object.keys((await v.workingState.get('s', { includeRetired: false, limit: 10 }))['nodes'] as object),
    ).toEqual(['a']);
    await using ledger = await openLedger({ url });
    await ledger.startTurn({ sessionId: 'n1', turnId: 't1', mode: 'native', model: 'm', prompt: 'same task' });
    await ledger.finishTurn({
      sessionId: 'n1',
      turnId: 't1',
      usage: { inputTokens: 100, outputTokens: 20, cacheReadTokens: 50 },
      outcome: 'completed',
    });
    await ledger.startTurn({ sessionId: 'b1', turnId: 't1', mode: 'balanced', model: 'm', prompt: 'same  task' });
    await ledger.finishTurn({
      sessionId: 'b1',
      turnId: 't1',
      usage: { inputTokens: 130, outputTokens: 25, cacheReadTokens: 60 },
      outcome: 'completed',
    });
    const c = await ledger.compare('native', 'balanced');
    expect(c.delta).toEqual({ available: true, meanTotalTokens: 45, medianTotalTokens: 45 });
    expect(c.matchedTurns.pairs).toBe(1);
  });
});
