/**
 * The proxy's accounting (token counts, metric rows, ledger turns) runs after each answer went
 * out; when it falls behind (here: a metrics store that stops answering), new requests wait before
 * they are reduced instead of growing the backlog without bound, and nothing is dropped.
 */
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { createProxy } from '../../adapters/proxy/index.js';
import { readMetricsSummary } from '../support/metrics-summary.js';
import { startHarness, type Harness } from '../proxy/support/harness.js';
import { chat } from '../proxy/support/upstream.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const hop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Make the metrics store stop answering (the accounting falls behind) until the returned function is called. */
function holdMetricRows(harness: Harness): () => void {
  const { vault } = harness.proxy.terminator;
  const write = vault.recordRequestMetrics.bind(vault);
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  vault.recordRequestMetrics = async (rows) => {
    await gate;
    return write(rows);
  };
  return open;
}

const waits = async (): Promise<number> => (await h!.proxy.metrics.accountingWaits.get()).values[0]?.value ?? 0;

describe('accounting backlog', () => {
  it('holds requests while accountingBacklog answered ones wait, then answers and accounts for all of them', async () => {
    const backlog = 2;
    h = await startHarness(() => chat.text('ok'), { proxy: { accountingBacklog: backlog } });
    const open = holdMetricRows(h);
    const client = new OpenAI({ apiKey: 'sk-test', baseURL: `${h.url}/v1`, maxRetries: 0 });
    const answers: string[] = [];
    const sending = (async () => {
      for (let i = 0; i < 6; i++) {
        const done = await client.chat.completions.create({
          model: 'gpt-4o',
          messages: [{ role: 'user', content: `request ${i}` }],
        });
        answers.push(done.choices[0]!.message.content ?? '');
      }
    })();
    while ((await waits()) < 1) await hop();
    // The third request waits for the accounting of the first two; however long the store hangs, no
    // further request goes upstream (the pause only gives an unbounded backlog time to show itself).
    for (let i = 0; i < 20; i++) await hop();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(h.upstream.requests).toHaveLength(backlog);
    open();
    await sending;
    await h.proxy.settled();
    expect(answers).toEqual(Array(6).fill('ok'));
    expect(h.upstream.requests).toHaveLength(6);
    expect(readMetricsSummary(h.dbPath).requests).toBe(6);
  });

  it('holds requests while a sixteenth of the memory bound in body bytes waits, though accountingBacklog has room', async () => {
    // 256 MiB: the backlog holds at most 16 MiB of bodies (client and sent). Each request here is
    // about 6 MB of them (a 3 MB message, sent as is), so the fourth waits for the first three.
    h = await startHarness(() => chat.text('ok'), {
      flags: { maxMemoryBytes: 256 * 2 ** 20 },
      proxy: { accountingBacklog: 128 },
    });
    const open = holdMetricRows(h);
    const client = new OpenAI({ apiKey: 'sk-test', baseURL: `${h.url}/v1`, maxRetries: 0 });
    const big = 'x'.repeat(3_000_000);
    const sending = (async () => {
      for (let i = 0; i < 5; i++)
        await client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: `${i} ${big}` }] });
    })();
    while ((await waits()) < 1) await hop();
    for (let i = 0; i < 20; i++) await hop();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(h.upstream.requests).toHaveLength(3);
    open();
    await sending;
    await h.proxy.settled();
    expect(h.upstream.requests).toHaveLength(5);
    expect(readMetricsSummary(h.dbPath).requests).toBe(5);
  });

  it('refuses an accountingBacklog below 1 (ConfigError) before opening anything', async () => {
    await expect(createProxy({ accountingBacklog: 0, env: {} })).rejects.toMatchObject({ code: 'E_CONFIG' });
  });
});
