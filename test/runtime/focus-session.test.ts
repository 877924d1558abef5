/**
 * The focus terms a session's requests give its tool views (the lines of a large output that
 * mention what the conversation is about) belong to that session: gone when its host ends it, and
 * never shared with a session of the same id in another tenant.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTerminator, type Terminator } from '../../src/runtime/index.js';
import type { StepContext, ToolResult } from '../../src/step.js';

const FIND = readFileSync(join(import.meta.dirname, '../fixtures/terminal/find.txt'), 'utf8');
const WANTED = 'src/internal/operators/mergeMap.ts';
const FOCUS_HEADER = '[lines of the full output that mention names from this conversation, left out above]';

let dir: string;
let tt: Terminator;
beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tt-focus-session-'));
  tt = await createTerminator({ overrides: { dbPath: join(dir, 'vault.sqlite3') }, env: {} });
});
afterEach(async () => {
  await tt.close();
  rmSync(dir, { recursive: true, force: true });
});

let calls = 0;
/** A large `find` output through the tool stage; each call a command of its own (no temporal delta). */
async function findView(context: StepContext): Promise<string> {
  calls += 1;
  const result: ToolResult = {
    callId: `call_${calls}`,
    name: 'terminal',
    args: { command: `find src -type f -newer stamp_${calls}` },
    content: FIND,
  };
  const out = await tt.reduceToolResult(result, context);
  expect(out.value.content).not.toBe(FIND); // compacted: a view with a receipt
  return out.value.content;
}

/** A request whose task names mergeMap: the session's focus terms. */
async function ask(context: StepContext): Promise<void> {
  await tt.reduceRequest(
    { model: 'gpt-4o', messages: [{ role: 'user', content: 'Why does mergeMap drop inner values?' }] },
    { ...context, requestId: `r${calls}` },
  );
}

describe('focus terms per session', () => {
  it("are the session's own until its host ends it", async () => {
    const s = { sessionId: 'focus-a' };
    expect(await findView(s)).not.toContain(WANTED); // no request seen yet: no focus lines
    await ask(s);
    expect(await findView(s)).toContain(`${FOCUS_HEADER}\n${WANTED}\n`);
    await tt.endSession(s);
    expect(await findView(s)).not.toContain(WANTED);
  });

  it('are not shared by a session of the same id in another tenant', async () => {
    await ask({ sessionId: 'same', tenant: 'a' });
    expect(await findView({ sessionId: 'same', tenant: 'a' })).toContain(WANTED);
    expect(await findView({ sessionId: 'same', tenant: 'b' })).not.toContain(WANTED);
    expect(await findView({ sessionId: 'same' })).not.toContain(WANTED);
  });
});
