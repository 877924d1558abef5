/**
 * renderItems (src/compile/apply.ts) renders a request from an earlier call's result for the
 * leading items the two lists share. A list a caller owns (not a recognised private copy: prefix
 * recognition off, or a view read straight from the caller's request) may be changed in place
 * after the call, so what the call keeps to compare the next list with must be a copy of it.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { renderItems } from '../../src/compile/apply.js';
import { sessionStateFactory } from '../../src/compile/session.js';
import { readRequest } from '../../src/model/index.js';
import type { Slot } from '../../src/model/types.js';
import { createVault } from '../../src/vault/index.js';
import { fileFixture, readCall, readOutput } from './helpers.js';

const { dir, counter } = fileFixture('apply');
const vault = await createVault({ path: join(dir, 'apply.sqlite3') });
afterAll(() => vault.close());

type Obj = Record<string, unknown>;

const call = readCall;
const out = (id: string): Obj => readOutput(id);

describe('renderItems', () => {
  it('renders a caller list changed in place after the previous call as it renders it from scratch', () => {
    const state = sessionStateFactory({ vault, counter })({ sessionId: 's' });
    // The caller's own array, read without recognition: view.items is that very array.
    const messages: Obj[] = [
      { role: 'system', content: 'agent' },
      { role: 'user', content: 'fix' },
      call('c1'),
      out('c1'),
    ];
    const request = { model: 'm', messages };
    const first = readRequest(request);
    const output = first.slots.find((s): s is Slot => s.kind === 'tool_output')!;
    const changes = [{ slot: output, text: '[digest of c1.ts]' }];
    expect((renderItems(state, first, changes)![3] as Obj)['content']).toBe('[digest of c1.ts]');
    // The host replaces an earlier item and appends two, in the array it handed over.
    messages[1] = { role: 'user', content: 'fix it properly' };
    messages.push(call('c2'), out('c2'));
    const next = readRequest(request);
    const expected = renderItems(sessionStateFactory({ vault, counter })({ sessionId: 'fresh' }), next, changes);
    const rendered = renderItems(state, next, changes);
    expect(rendered).toEqual(expected);
    expect(rendered![1]).toBe(messages[1]);
    expect(rendered).toHaveLength(6);
  });
});
