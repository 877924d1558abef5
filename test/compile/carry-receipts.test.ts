/**
 * The receipts a request names are the ones it delivers (pins for the session): a rendering whose
 * artifact the delivery does not cover may be pruned while the model still holds its receipt, and
 * one the vault could not store must stay inline. Every artifact id a compiled request names is
 * among the artifacts its decision delivered, and recovers the output it stands for.
 */
import { join } from 'node:path';
import { Subject } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { compileRequest } from '../../operators/compile-request.js';
import { createStep, type ProviderRequest, type Step } from '../../src/step.js';
import { createVault } from '../../src/vault/index.js';
import type { PutInput, StoreScope, Vault } from '../../src/vault/types.js';
import { fileFixture, readCall, readOutput, recover } from './helpers.js';

const { dir, counter } = fileFixture('carry-receipts');

type Obj = Record<string, unknown>;
type Message = { role: string; content: unknown; tool_call_id?: string };

const call = readCall;
const out = (id: string): Obj => readOutput(id, 12);
const ARTIFACT = /a_[0-9a-f]{32}/g;

/** One compileRequest subscription: send requests one at a time, get each compiled step back. */
function chain(vault: Vault): {
  send: (r: ProviderRequest, sessionId: string) => Promise<Step<ProviderRequest>>;
  close: () => void;
} {
  const input = new Subject<Step<ProviderRequest>>();
  const outs: Step<ProviderRequest>[] = [];
  const sub = input
    .pipe(compileRequest({ vault, counter, minVaultChars: 150, blockTurns: 1 }))
    .subscribe((s) => outs.push(s));
  let n = 0;
  return {
    send: async (r, sessionId) => {
      const i = n++;
      input.next(createStep(r, { sessionId, requestId: `r${i}` }));
      while (outs.length <= i) await new Promise((resolve) => setImmediate(resolve));
      return outs[i]!;
    },
    close: () => sub.unsubscribe(),
  };
}

/** Four tool turns sent through one subscription, then closed (it digested a0..a2): the messages. */
async function digested(vault: Vault): Promise<Obj[]> {
  let messages = head('fix it');
  const first = chain(vault);
  for (let n = 0; n < 4; n++) {
    messages = [...messages, call(`a${n}`), out(`a${n}`)];
    await first.send({ model: 'gpt-4o', messages }, 's');
  }
  first.close();
  return messages;
}

/** The content each tool call's output had in the request the host sent. */
const sent = (r: ProviderRequest): Map<string, unknown> =>
  new Map((r['messages'] as Message[]).filter((m) => m.role === 'tool').map((m) => [m.tool_call_id!, m.content]));

/**
 * Every artifact id a compiled request names: each among the artifacts its decision delivered,
 * and each the exact output its message had in the request the host sent. Returns the compiled
 * content per tool call.
 */
async function checkNamed(
  vault: Vault,
  request: ProviderRequest,
  step: Step<ProviderRequest>,
): Promise<Map<string, unknown>> {
  const original = sent(request);
  const delivered = new Set(step.decisions.flatMap((d) => d.artifacts ?? []));
  const compiled = sent(step.value);
  for (const [id, content] of compiled) {
    const names = typeof content === 'string' ? (content.match(ARTIFACT) ?? []) : [];
    for (const artifact of names) {
      expect(delivered, `${id} names ${artifact}`).toContain(artifact);
      expect(await recover(vault, artifact).catch(() => 'not in the vault'), `${id} names ${artifact}`).toBe(
        original.get(id),
      );
    }
  }
  return compiled;
}

/** `vault` whose puts of `text` throw (a store that cannot take that one artifact). */
function refusing(vault: Vault, text: string): Vault {
  return new Proxy(vault, {
    get: (t, k) => {
      if (k === 'put')
        return async (...args: Parameters<Vault['put']>) => {
          if (args[0].content === text) throw new Error('disk full');
          return t.put(...args);
        };
      if (k === 'putMany')
        // A batch stores the others and refuses `text` in its own slot.
        return async (inputs: readonly PutInput[], scope?: StoreScope) => {
          const stored = [
            ...(await t.putMany!(
              inputs.filter((i) => i.content !== text),
              scope,
            )),
          ];
          return inputs.map((i) => (i.content === text ? new Error('disk full') : stored.shift()!));
        };
      return Reflect.get(t, k, t) as unknown;
    },
  });
}

const head = (task: string): Obj[] => [
  { role: 'system', content: 'agent' },
  { role: 'user', content: task },
];

describe('the receipts a request names are the ones it delivers', () => {
  it('names only its own delivered artifacts when two conversations take turns under one session id', async () => {
    const vault = await createVault({ path: join(dir, 'two-conversations.sqlite3') });
    const c = chain(vault);
    try {
      // Each request's rewrites follow the other conversation's: the previous receipts are not its own.
      let a = head('fix a');
      let b = head('fix b');
      let rewritten = 0;
      for (let n = 0; n < 4; n++) {
        a = [...a, call(`a${n}`), out(`a${n}`)];
        b = [...b, call(`b${n}`), out(`b${n}`)];
        for (const messages of [a, b]) {
          const request = { model: 'gpt-4o', messages };
          const compiled = await checkNamed(vault, request, await c.send(request, 's'));
          for (const [id, content] of compiled) if (content !== sent(request).get(id)) rewritten++;
        }
      }
      expect(rewritten).toBe(2 * (1 + 2 + 3)); // every output but the newest, in both conversations
    } finally {
      c.close();
      await vault.close();
    }
  });

  it('stores the texts a request must vault again in one batch put (one write transaction), not one put each', async () => {
    const vault = await createVault({ path: join(dir, 'batch.sqlite3') });
    let messages = await digested(vault);
    // A new process renders a0..a2 from the vault's memo and must vault their evidence again.
    const calls: Record<string, number[]> = { put: [], putMany: [] };
    const counting = new Proxy(vault, {
      get: (t, k) => {
        const f = Reflect.get(t, k, t) as unknown;
        if (k !== 'put' && k !== 'putMany') return f;
        return (input: PutInput | readonly PutInput[], scope?: StoreScope) => {
          calls[k]!.push(Array.isArray(input) ? input.length : 1);
          return (f as (i: unknown, s?: StoreScope) => Promise<unknown>).call(t, input, scope);
        };
      },
    });
    const second = chain(counting);
    try {
      messages = [...messages, call('a4'), out('a4')];
      const request = { model: 'gpt-4o', messages };
      const compiled = await checkNamed(vault, request, await second.send(request, 's'));
      const rewritten = [...compiled].filter(([id, content]) => content !== sent(request).get(id)).length;
      expect(rewritten).toBeGreaterThanOrEqual(3);
      expect(calls).toEqual({ put: [], putMany: [rewritten] });
    } finally {
      second.close();
      await vault.close();
    }
  });

  it('keeps an output whose artifact the vault refused inline in the next request too, and names the others', async () => {
    const vault = await createVault({ path: join(dir, 'refused.sqlite3') });
    // One subscription digested a0..a2; a second one (a new process) renders them from the vault's
    // memo and vaults their evidence again, and the vault refuses a1's: a drop in the middle.
    let messages = await digested(vault);
    const refused = out('a1')['content'];
    const second = chain(refusing(vault, refused as string));
    try {
      for (let n = 4; n < 7; n++) {
        messages = [...messages, call(`a${n}`), out(`a${n}`)];
        const request = { model: 'gpt-4o', messages };
        const step = await second.send(request, 's');
        const compiled = await checkNamed(vault, request, step);
        expect(compiled.get('a1')).toBe(refused);
        for (let k = 0; k < n; k++) if (k !== 1) expect(compiled.get(`a${k}`)).not.toBe(sent(request).get(`a${k}`));
        expect(step.decisions.map((d) => d.kind)).toEqual(['failed_open', 'applied']);
      }
    } finally {
      second.close();
      await vault.close();
    }
  });
});
