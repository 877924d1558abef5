import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createReceipt, renderReceipt } from '../../src/receipts/index.js';
import { createStep } from '../../src/step.js';
import {
  InjectedFault,
  checkRecovery,
  createResourceProbe,
  deepFreeze,
  faultyVault,
  firstDifference,
  prefixBreak,
  readArtifact,
  throwingCounter,
  throwingSpawn,
  toolOutput,
  VAULT_METHODS,
} from '../../src/testing/index.js';
import { provenance } from '../../src/testing/deep.js';
import { createVault } from '../../src/vault/index.js';
import type { Vault } from '../../src/vault/types.js';

let vault: Vault;
beforeAll(async () => {
  vault = await createVault({ path: ':memory:', maxPageChars: 1_000 });
});
afterAll(async () => {
  await vault.close();
});

describe('faultyVault', () => {
  it('fails only the chosen methods, after the allowed calls, and logs them', async () => {
    const broken = faultyVault(vault, { failOn: ['put'], after: 1 });
    const first = await broken.put({ content: 'first' });
    await expect(broken.put({ content: 'second' })).rejects.toBeInstanceOf(InjectedFault);
    expect((await broken.page(first.artifactId)).content).toBe('first');
    expect(broken.faultLog).toEqual({ calls: { put: 2, page: 1 }, faults: 1 });
  });

  it('throws synchronously in throw mode and fails every method by default', () => {
    const broken = faultyVault(vault, { mode: 'throw' });
    expect(() => broken.usage()).toThrow(/injected fault: vault\.usage/u);
    expect(broken.path).toBe(':memory:');
  });

  it('can fail every data method of a vault, the working-state store included', () => {
    const methods = (o: object, prefix = ''): string[] =>
      Object.entries(o)
        .filter(([, v]) => typeof v === 'function')
        .map(([k]) => prefix + k);
    const data = [...methods(vault), ...methods(vault.workingState, 'workingState.')].filter(
      (m) => m !== 'health' && m !== 'close',
    );
    expect([...VAULT_METHODS].sort()).toEqual(data.sort());
    const broken = faultyVault(vault, { mode: 'throw' });
    const call = (name: string): unknown => {
      const [owner, method] = name.startsWith('workingState.')
        ? [broken.workingState, name.slice('workingState.'.length)]
        : [broken, name];
      return (owner as unknown as Record<string, () => unknown>)[method]!();
    };
    for (const name of VAULT_METHODS) expect(() => call(name), name).toThrow(`injected fault: vault.${name}`);
    expect(broken.faultLog.faults).toBe(VAULT_METHODS.length);
  });

  it('reaches the real working-state store for the methods not chosen', async () => {
    const broken = faultyVault(vault, { failOn: ['workingState.apply'] });
    await expect(broken.workingState.apply('s', [])).rejects.toBeInstanceOf(InjectedFault);
    await expect(broken.workingState.get('s', { includeRetired: false, limit: 10 })).resolves.toMatchObject({
      nodes: {},
    });
    expect(broken.workingState).toBe(broken.workingState);
    expect(broken.faultLog).toEqual({ calls: { 'workingState.apply': 1, 'workingState.get': 1 }, faults: 1 });
  });
});

describe('throwing dependencies', () => {
  it('counter claims exactness and throws; spawn throws', () => {
    const counter = throwingCounter();
    expect(counter.exact).toBe(true);
    expect(() => counter.count('x')).toThrow(InjectedFault);
    expect(() => throwingSpawn()('node')).toThrow(InjectedFault);
  });
});

describe('createResourceProbe', () => {
  it('counts a child as live until it exits and kills leaked children on dispose', async () => {
    const probe = createResourceProbe();
    const child = probe.spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)']);
    expect(probe.live()).toEqual([{ kind: 'child', detail: expect.stringMatching(/^pid \d+/u) as unknown as string }]);
    expect(await probe.settle(100)).toHaveLength(1);
    probe.dispose();
    expect(await probe.settle(5_000)).toEqual([]);
    expect(child.signalCode).toBe('SIGKILL');
  });

  it('tracks timers until cleared or fired, controllers until aborted, custom handles until released', async () => {
    const probe = createResourceProbe();
    const t = probe.setTimeout(() => undefined, 60_000);
    let fired = false;
    probe.setTimeout(() => (fired = true), 1);
    const controller = probe.abortController();
    const handle = probe.track('socket', 'db');
    expect(
      probe
        .live()
        .map((r) => r.kind)
        .sort(),
    ).toEqual(['abort-controller', 'socket', 'timer', 'timer']);
    probe.clearTimeout(t);
    controller.abort();
    handle.release();
    expect(await probe.settle(1_000)).toEqual([]);
    expect(fired).toBe(true);
  });
});

describe('deep helpers', () => {
  it('deep-freezes nested values', () => {
    const value = deepFreeze({ a: [{ b: 'c' }] });
    expect(Object.isFrozen(value.a[0])).toBe(true);
    expect(() => {
      (value.a[0] as { b: string }).b = 'x';
    }).toThrow(TypeError);
  });

  it('names the first difference by path without dumping content', () => {
    expect(firstDifference({ m: [1, { c: 'abc' }] }, { m: [1, { c: 'abd' }] })).toBe(
      '$.m[1].c: a string of 3 code points ("abc") became a string of 3 code points ("abd")',
    );
    expect(firstDifference({ a: 1 }, { a: 1 })).toBeUndefined();
  });

  it('classifies artifact provenance against the inputs', () => {
    const inputs = [
      {
        messages: [
          { role: 'user', content: 'hello' },
          { role: 'tool', content: 'out' },
          { role: 'user', content: 'bye' },
        ],
      },
    ];
    expect(provenance('hello', inputs)).toBe('exact');
    expect(provenance('ell', inputs)).toBe('substring');
    expect(
      provenance(
        JSON.stringify([
          { role: 'user', content: 'hello' },
          { role: 'tool', content: 'out' },
        ]),
        inputs,
      ),
    ).toBe('structure');
    expect(provenance('forged', inputs)).toBeUndefined();
  });

  it('finds where a request stops being a prefix of the next', () => {
    const a = { messages: [{ role: 'user', content: 'x' }] };
    expect(
      prefixBreak(a, {
        messages: [
          { role: 'user', content: 'x' },
          { role: 'assistant', content: 'y' },
        ],
      }),
    ).toBeUndefined();
    expect(prefixBreak(a, { messages: [{ role: 'user', content: 'z' }] })?.label).toBe('messages[0] (user)');
  });
});

describe('recovery check', () => {
  it('reads multi-page artifacts (astral text included) and accepts an exact receipt', async () => {
    const [content] = fc.sample(toolOutput({ shapes: ['unicode'], sizes: ['large'] }), { numRuns: 1, seed: 3 });
    const put = await vault.put({ content: content! });
    expect(await readArtifact(vault, put.artifactId)).toBe(content);
    const receipt = renderReceipt(createReceipt(put.artifactId, 'terminal', put.chars, put.sha256));
    const input = { callId: 'c', name: 'terminal', args: {}, content: content! };
    await expect(
      checkRecovery(vault, [input], createStep({ ...input, content: receipt }, { sessionId: 's' }), 'step 0'),
    ).resolves.toBeUndefined();
  });

  it('rejects a receipt whose artifact is not what the caller supplied', async () => {
    const put = await vault.put({ content: 'something else entirely' });
    const receipt = renderReceipt(createReceipt(put.artifactId, 'terminal', put.chars, put.sha256));
    const input = { callId: 'c', name: 'terminal', args: {}, content: 'original output' };
    await expect(
      checkRecovery(vault, [input], createStep({ ...input, content: receipt }, { sessionId: 's' }), 'step 0'),
    ).rejects.toThrow(/is not text the caller supplied/u);
  });
});
