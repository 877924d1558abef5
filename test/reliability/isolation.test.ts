/**
 * Issue 14 item 2: one session cannot read another's evidence. Before, the recovery tool's
 * artifact_search, artifact_find, artifact_get and artifact_peek ran over the whole vault: a
 * session that knew no id searched for `AWS_SECRET` and then read another session's secret line.
 * Now every read and search is scoped to the caller's tenant and session (what it observed or was
 * delivered), through the assembled Terminator as a host (or the proxy, by API-key digest) uses it.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerRecoveryCall } from '../../src/recovery/loop.js';
import { createTerminator, type Terminator } from '../../src/runtime/index.js';
import type { ProviderRequest, ToolResult } from '../../src/step.js';
import { receiptIds, tempDir } from './harness.js';

const { dir, cleanup } = tempDir('tt-isolation-');
let tt: Terminator;
beforeAll(async () => {
  tt = await createTerminator({ env: {}, overrides: { dbPath: join(dir, 'vault.sqlite3') }, ledger: false });
});
afterAll(async () => {
  await tt.close();
  cleanup();
});

const SECRET = 'AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
const searchOutput = (tag: string): string =>
  Array.from({ length: 400 }, (_, i) =>
    i === 217
      ? `config/${tag}.env:3:${SECRET}`
      : `src/${tag}/module_${i}.ts:${i + 1}: const value_${i} = compute(${i});`,
  ).join('\n');

async function tool(
  args: Record<string, unknown>,
  host: { sessionId: string; tenant?: string },
): Promise<Record<string, any>> {
  return JSON.parse(await tt.recoveryTool.handle(args, host)) as Record<string, any>;
}

/** Session A's search output with the secret goes through the tool stream and comes back as a receipt. */
async function vaultFor(host: { sessionId: string; tenant?: string }, tag: string): Promise<string> {
  const result: ToolResult = {
    callId: `c-${tag}`,
    name: 'search_files',
    args: { pattern: 'value' },
    content: searchOutput(tag),
  };
  const out = await tt.reduceToolResult(result, host);
  const [id] = receiptIds(out.value.content);
  expect(id, 'the output was vaulted').toBeDefined();
  return id!;
}

describe('the recovery tool reads only what the calling session was shown', () => {
  it('another session of the same tenant finds nothing and reads nothing of it', async () => {
    const id = await vaultFor({ sessionId: 'alice' }, 'alice');
    const bob = { sessionId: 'bob' };
    expect((await tool({ action: 'artifact_search', query: 'AWS_SECRET' }, bob)).results).toEqual([]);
    for (const action of ['artifact_get', 'artifact_peek']) {
      expect((await tool({ action, artifact_id: id }, bob)).error?.code, action).toBe('E_ARTIFACT_NOT_FOUND');
    }
    const find = await tool({ action: 'artifact_find', artifact_id: id, query: 'AWS_SECRET' }, bob);
    expect(find.error?.code).toBe('E_ARTIFACT_NOT_FOUND');
    expect(JSON.stringify(find)).not.toContain('wJalr');
    // The session it was delivered to reads it.
    const alice = { sessionId: 'alice' };
    expect(
      (await tool({ action: 'artifact_search', query: 'AWS_SECRET' }, alice)).results.map(
        (r: { artifact_id: string }) => r.artifact_id,
      ),
    ).toEqual([id]);
    expect(
      (await tool({ action: 'artifact_find', artifact_id: id, query: 'AWS_SECRET' }, alice)).matches[0].text,
    ).toContain(SECRET);
  });

  it('the same session id under another tenant (another API key) is another session', async () => {
    const mine = { sessionId: 'shared-id', tenant: 'k_aaaaaaaaaaaa' };
    const theirs = { sessionId: 'shared-id', tenant: 'k_bbbbbbbbbbbb' };
    const id = await vaultFor(mine, 'tenant-a');
    // As the proxy answers its intercepted calls: scoped by the API-key digest it put in the context.
    const other = JSON.parse(
      await answerRecoveryCall(tt.recoveryTool, { action: 'artifact_get', artifact_id: id }, theirs),
    ) as Record<string, any>;
    expect(other.error?.code).toBe('E_ARTIFACT_NOT_FOUND');
    expect(
      JSON.parse(
        await answerRecoveryCall(tt.recoveryTool, { action: 'artifact_search', query: 'wJalrXUtnFEMI' }, theirs),
      ).results,
    ).toEqual([]);
    const own = JSON.parse(
      await answerRecoveryCall(tt.recoveryTool, { action: 'artifact_get', artifact_id: id, limit: 20_000 }, mine),
    ) as Record<string, any>;
    expect(own.content).toContain(SECRET);
    // A host without tenants (the default '') is yet another tenant.
    expect((await tool({ action: 'artifact_get', artifact_id: id }, { sessionId: 'shared-id' })).error?.code).toBe(
      'E_ARTIFACT_NOT_FOUND',
    );
  });

  it('a session that was delivered the same evidence (its own copy of the output) reads it', async () => {
    const id = await vaultFor({ sessionId: 'first' }, 'same');
    const second = { sessionId: 'second' };
    expect((await tool({ action: 'artifact_get', artifact_id: id }, second)).error?.code).toBe('E_ARTIFACT_NOT_FOUND');
    // The second session's own request carries the same output twice: the earlier copy becomes a
    // receipt delivered to it, so from now on the second session may recover it.
    const content = searchOutput('same');
    const request: ProviderRequest = {
      model: 'gpt-4o',
      messages: [
        { role: 'user', content: 'search twice' },
        {
          role: 'assistant',
          content: null,
          tool_calls: ['x1', 'x2'].map((cid) => ({
            id: cid,
            type: 'function',
            function: { name: 'search_files', arguments: '{"pattern":"value"}' },
          })),
        },
        { role: 'tool', tool_call_id: 'x1', content },
        { role: 'tool', tool_call_id: 'x2', content },
      ],
    };
    const out = await tt.reduceRequest(request, second);
    expect(receiptIds(out.value)).toContain(id);
    const page = await tool({ action: 'artifact_get', artifact_id: id, limit: 20_000 }, second);
    expect(page.error).toBeUndefined();
    expect(page.content).toContain(SECRET);
  });
});
