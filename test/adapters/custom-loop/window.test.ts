/**
 * Issue 51 through the custom loop: a `wrapOpenAI({ handleRecovery: true })` host with a window W
 * set sends only requests that fit W, the recovery tool it adds and every recovery-round
 * continuation included (each continuation goes through the window fit again, as the gateway's do).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { wrapOpenAI } from '../../../adapters/custom-loop/index.js';
import { promptParts } from '../../../src/budget/counter.js';
import { createTiktokenCounter } from '../../../src/measure/index.js';
import { referencedArtifacts } from '../../../src/receipts/index.js';
import { createTerminator } from '../../../src/runtime/index.js';
import type { Terminator } from '../../../src/runtime/types.js';
import type { ProviderRequest, StepContext } from '../../../src/step.js';
import { chatRead, question } from '../../support/migration-session.js';

const W = 16_000;
const R = 1024;
const counter = createTiktokenCounter('o200k_base');
afterAll(() => counter.dispose?.());

/** Prompt tokens by the exact counter plus the output cap the request asks for (R when it names none). */
function asked(body: ProviderRequest): number {
  const prompt = promptParts(body).reduce((n, part) => n + counter.count(part), 0);
  const cap = ['max_tokens', 'max_completion_tokens'].map((k) => body[k]).find((v) => typeof v === 'number');
  return prompt + ((cap as number | undefined) ?? R);
}

/** A 120-turn Chat session's last request: a large file read every 10th turn, short answers between. */
function lastRequest(): ProviderRequest {
  const messages: unknown[] = [{ role: 'system', content: 'You migrate databases carefully.' }];
  for (let t = 0; t < 120; t++) {
    messages.push({ role: 'user', content: question(t) });
    if (t % 10 === 0) messages.push(...chatRead(t));
    messages.push({ role: 'assistant', content: `Table t${t} is migrated; its ${t % 7} indexes are in place.` });
  }
  messages.push({ role: 'user', content: 'Summarise every table you migrated.' });
  return { model: 'local-16k', messages };
}

describe('the custom loop keeps every request inside the window', () => {
  it('the recovery tool and every recovery-round continuation fit W − R by the exact counter', async () => {
    await using tt = await createTerminator({
      env: {},
      overrides: { dbPath: ':memory:', incontext: { compressionWindowTokens: W, minOutputTokens: R } },
      counter,
    });
    // The scripted model recovers two artifacts a round for three rounds, then answers.
    const sent: ProviderRequest[] = [];
    const asks: string[] = [];
    const create = (body: ProviderRequest): Promise<unknown> => {
      sent.push(body);
      const rounds = asks.length / 2;
      const offered = JSON.stringify(body['tools'] ?? []).includes('token_terminator');
      const ids = referencedArtifacts(JSON.stringify(body['messages']).replace(/\\n/g, '\n')).filter(
        (id) => !asks.includes(id),
      );
      if (!offered || rounds >= 3 || ids.length === 0)
        return Promise.resolve({
          choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
        });
      const pick = ids.slice(0, 2);
      asks.push(...pick);
      return Promise.resolve({
        choices: [
          {
            index: 0,
            message: {
              role: 'assistant',
              content: null,
              tool_calls: pick.map((id, i) => ({
                id: `rec-${rounds}-${i}`,
                type: 'function',
                function: {
                  name: 'token_terminator',
                  arguments: JSON.stringify({ action: 'artifact_get', artifact_id: id }),
                },
              })),
            },
            finish_reason: 'tool_calls',
          },
        ],
      });
    };
    const client = { chat: { completions: { create } } };
    // The contexts the pipeline ran with (one per request sent).
    const contexts: StepContext[] = [];
    const watched = Object.create(tt) as Terminator;
    Object.assign(watched, {
      reduceRequest: (...args: Parameters<Terminator['reduceRequest']>) => {
        contexts.push(args[1]);
        return tt.reduceRequest(...args);
      },
    });
    const openai = wrapOpenAI(client, watched, { sessionId: 'window-loop', handleRecovery: true });
    const body = lastRequest();
    expect(asked(body)).toBeGreaterThan(W);
    const out = (await openai.chat.completions.create(body as never)) as {
      choices: { message: { content: string } }[];
    };
    expect(out.choices[0]?.message.content).toBe('ok');
    // Three rounds of two recoveries each went upstream (so three continuations), and every request fits W.
    expect(asks).toHaveLength(6);
    expect(sent).toHaveLength(4);
    for (const r of sent) expect(asked(r)).toBeLessThanOrEqual(W);
    // Prompt alone within W − R: the cap the pipeline set never went below R.
    for (const r of sent) expect(r['max_completion_tokens']).toBeGreaterThanOrEqual(R);
    // The first request left room for the tool it got after the pipeline; the continuations carry it already.
    expect(contexts.map((c) => (c.addedPromptTokens ?? 0) > 0)).toEqual([true, false, false, false]);
  }, 120_000);
});
