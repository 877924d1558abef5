/**
 * recovers-exactly over a composed pipeline: a later stage may vault what an earlier stage already
 * reduced (turns collapsed after their tool outputs became receipts). The artifact is then caller
 * structure in which markers stand for texts their own artifacts hold exactly: accepted; anything
 * else in it must still be the caller's, item for item.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson, codePoints } from '../../src/measure/index.js';
import { createReceipt, renderReceipt } from '../../src/receipts/index.js';
import { createStep, type ProviderRequest } from '../../src/step.js';
import { checkRecovery, InvariantViolation } from '../../src/testing/index.js';
import { createVault } from '../../src/vault/index.js';
import type { Vault } from '../../src/vault/types.js';

let vault: Vault;
beforeAll(async () => {
  vault = await createVault({ path: ':memory:' });
});
afterAll(async () => {
  await vault.close();
});

const OUTPUT = 'build log line\n'.repeat(60);
const BLOCKS = [{ type: 'text', text: 'search hit\n'.repeat(40) }];
const input: ProviderRequest = {
  messages: [
    { role: 'system', content: 'sys' },
    { role: 'user', content: 'Fix the bug.' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'c1', type: 'function', function: { name: 'terminal', arguments: '{}' } },
        { id: 'c2', type: 'function', function: { name: 'search_files', arguments: '{}' } },
      ],
    },
    { role: 'tool', tool_call_id: 'c1', content: OUTPUT },
    { role: 'tool', tool_call_id: 'c2', content: BLOCKS },
    { role: 'user', content: 'and now?' },
  ],
};
const items = input['messages'] as Record<string, unknown>[];

async function receiptFor(text: string, tool: string): Promise<string> {
  const { artifactId, sha256 } = await vault.put({ content: text, toolName: tool });
  return renderReceipt(createReceipt(artifactId, tool, codePoints(text), sha256));
}

/** Stage two: collapse items 1–4 (as stage one left them) into a note riding in a user message. */
async function collapsed(turns: readonly unknown[]): Promise<ProviderRequest> {
  const { artifactId } = await vault.put({ content: canonicalJson(turns), toolName: 'collapse' });
  const note = `[Token Terminator collapsed steps 0-1 (${turns.length} items) | artifact=${artifactId}]`;
  return { messages: [items[0], { role: 'user', content: `${note}\n\nFix the bug.` }, items[5]] };
}

const check = (value: ProviderRequest): Promise<void> =>
  checkRecovery(vault, [input], createStep(value, { sessionId: 's' }), 'step 0');

describe('recovers-exactly over composed stages', () => {
  it('accepts collapsed turns whose tool outputs an earlier stage had already receipted', async () => {
    const receipt = await receiptFor(OUTPUT, 'terminal');
    const view = `build log line\n…\n\n${await receiptFor(canonicalJson(BLOCKS), 'search_files')}`;
    const turns = [items[1], items[2], { ...items[3], content: receipt }, { ...items[4], content: view }];
    await expect(check(await collapsed(turns))).resolves.toBeUndefined();
  });

  it('rejects collapsed turns when a nested receipt names other text than it replaced', async () => {
    const wrong = await receiptFor(OUTPUT.slice(0, 400), 'terminal');
    const turns = [items[1], items[2], { ...items[3], content: wrong }, items[4]];
    await expect(check(await collapsed(turns))).rejects.toThrow(/is not text the caller supplied/u);
  });

  it('rejects collapsed turns that lost an item or changed text without a marker', async () => {
    const receipt = await receiptFor(OUTPUT, 'terminal');
    const dropped = [items[1], { ...items[3], content: receipt }, items[4]]; // the assistant call is gone
    const rewritten = [
      items[1],
      items[2],
      { ...items[3], content: receipt },
      { ...items[4], content: canonicalJson(BLOCKS) },
    ];
    for (const turns of [dropped, rewritten]) {
      const error = await check(await collapsed(turns)).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(InvariantViolation);
    }
  });
});
