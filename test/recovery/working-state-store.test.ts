import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { createRecoveryTool, type RecoveryToolHandle } from '../../src/recovery/index.js';
import { createVault } from '../../src/vault/index.js';
import type { Vault } from '../../src/vault/types.js';

let dir: string;
let path: string;
let vault: Vault;
/** A second connection to the same file, with a working state of at most 5 nodes. */
let store: Vault;
let tool: RecoveryToolHandle;

async function call(sessionId: string, args: Record<string, unknown>): Promise<Record<string, any>> {
  return JSON.parse(await tool.handle(args, { sessionId })) as Record<string, any>;
}

const node = (node_id: string, extra: Record<string, unknown> = {}) => ({
  op: 'node_create',
  node_id,
  kind: 'fact',
  ...extra,
});

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tt-wstate-'));
  path = join(dir, 'vault.sqlite3');
  vault = await createVault({ path });
  store = await createVault({ path, workingState: { maxNodes: 5 } });
  const config = loadConfig({ env: { HOME: dir }, overrides: { dbPath: path, workingGraphChars: 2000 } });
  tool = createRecoveryTool({ vault, config, workingState: store.workingState });
});

afterAll(async () => {
  await store.close();
  await vault.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('working-state store on the vault file', () => {
  it('applies a batch and returns nodes and edges for the same session', async () => {
    const applied = await call('s1', {
      action: 'working_state_apply',
      operations: [
        node('n1', { label: 'build fails', confidence: 0.9 }),
        { op: 'PROPOSITION_CREATE', node_id: 'n2', content: 'linker flag missing' },
        { op: 'EDGE_CREATE', edge_id: 'e1', kind: 'explains', source: 'n2', target: 'n1', event_id: 'evt_custom' },
      ],
    });
    expect(applied).toMatchObject({
      accepted: 3,
      counts: { nodes: 2, edges: 1, active_nodes: 2, active_edges: 1, events: 3 },
    });
    expect(applied.event_ids).toHaveLength(3);
    expect(applied.event_ids[2]).toBe('evt_custom');
    const state = await call('s1', { action: 'working_state_get' });
    expect(Object.keys(state.nodes).sort()).toEqual(['n1', 'n2']);
    expect(state.nodes.n2).toMatchObject({ kind: 'proposition', content: 'linker flag missing', status: 'active' });
    expect(state.edges.e1).toMatchObject({ source: 'n2', target: 'n1', kind: 'explains' });
  });

  it('keeps sessions apart', async () => {
    const other = await call('s2', { action: 'working_state_get' });
    expect(other).toEqual({ edges: {}, nodes: {} });
  });

  it('writes nothing when one operation of a batch is invalid', async () => {
    const result = await call('s3', {
      action: 'working_state_apply',
      operations: [node('a'), { op: 'EDGE_CREATE', edge_id: 'e', kind: 'k', source: 'a', target: 'missing' }],
    });
    expect(result.error.code).toBe('E_WORKING_STATE_INVALID');
    expect(result.error.message).toContain('operations[1]');
    expect(await call('s3', { action: 'working_state_get' })).toEqual({ edges: {}, nodes: {} });
  });

  it.each([
    [{ op: 'NODE_CREATE', node_id: 'x', kind: 'k', colour: 'red' }, 'unknown field colour'],
    [{ op: 'NODE_CREATE', node_id: 'x', kind: 'k', confidence: 1.5 }, 'confidence must be a number in [0, 1]'],
    [{ op: 'NODE_CREATE', node_id: 'x', kind: 'k', priority: true }, 'priority must be a number in [0, 1]'],
    [{ op: 'NODE_CREATE', node_id: ' ', kind: 'k' }, 'node_id must be 1–256 characters'],
    [{ op: 'NODE_CREATE', node_id: 'x\n', kind: 'k\u0007' }, 'kind must be 1–256 characters'],
    [{ op: 'NODE_CREATE', node_id: 'x' }, 'kind is required'],
    [{ op: 'NODE_UPDATE', node_id: 'nope', label: 'y' }, 'node nope is not active'],
    [{ op: 'NODE_DELETE', node_id: 'x' }, 'op must be one of'],
    [{ op: 'NODE_CREATE', node_id: 'x', kind: 'k', metadata: [1] }, 'metadata must be an object'],
  ])('rejects %j', async (operation, message) => {
    const result = await call('s4', { action: 'working_state_apply', operations: [operation] });
    expect(result.error.code).toBe('E_WORKING_STATE_INVALID');
    expect(result.error.message).toContain(message);
  });

  it('retires a node together with its edges, and shows them only with include_retired', async () => {
    await call('s5', {
      action: 'working_state_apply',
      operations: [node('a'), node('b'), { op: 'EDGE_CREATE', edge_id: 'ab', kind: 'k', source: 'a', target: 'b' }],
    });
    const retired = await call('s5', {
      action: 'working_state_apply',
      operations: [{ op: 'NODE_RETIRE', node_id: 'b' }],
    });
    expect(retired.counts).toMatchObject({ active_nodes: 1, active_edges: 0 });
    expect(await call('s5', { action: 'working_state_get' })).toMatchObject({ nodes: { a: {} }, edges: {} });
    const all = await call('s5', { action: 'working_state_get', include_retired: true });
    expect(all.nodes.b.status).toBe('retired');
    expect(all.edges.ab.status).toBe('retired');
  });

  it('limits nodes by recency and never returns a dangling edge', async () => {
    await call('s6', {
      action: 'working_state_apply',
      operations: [
        node('old'),
        node('new'),
        { op: 'EDGE_CREATE', edge_id: 'e', kind: 'k', source: 'old', target: 'new' },
      ],
    });
    await call('s6', {
      action: 'working_state_apply',
      operations: [{ op: 'NODE_UPDATE', node_id: 'old', label: 'touched' }],
    });
    const limited = await call('s6', { action: 'working_state_get', limit: 1 });
    expect(Object.keys(limited.nodes)).toEqual(['old']);
    expect(limited.edges).toEqual({});
  });

  it('caps nodes per session', async () => {
    const result = await call('s7', {
      action: 'working_state_apply',
      operations: ['a', 'b', 'c', 'd', 'e', 'f'].map((id) => node(id)),
    });
    expect(result.error.message).toContain('more than 5 nodes');
  });

  it('leaves the vault on the same file working, and reopenable', async () => {
    const { artifactId } = await vault.put({ content: 'still a vault', toolName: 'terminal' });
    const reopened = await createVault({ path });
    try {
      expect((await reopened.page(artifactId)).content).toBe('still a vault');
    } finally {
      await reopened.close();
    }
  });
});
