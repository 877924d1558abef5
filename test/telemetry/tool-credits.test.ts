import { describe, expect, it } from 'vitest';
import { canonicalJson, codePoints, createTiktokenCounter } from '../../src/measure/index.js';
import { STAGES } from '../../src/stages.js';
import type { Decision } from '../../src/step.js';
import { SessionCache } from '../../src/session/session-cache.js';
import { ToolCredits } from '../../src/telemetry/tool-credits.js';

const counter = createTiktokenCounter();
const RAW = Array.from({ length: 400 }, (_, i) => `tests/test_${i}.py::test_case PASSED`).join('\n');
const VIEW = '[compressed: 400 passed] artifact a_0123456789abcdef0123456789abcdef';
const DELTA =
  '[Token Terminator temporal delta | current=a_0123456789abcdef0123456789abcdef | previous=a_fedcba9876543210fedcba9876543210 | no changes]';
const jsonChars = (s: string): number => codePoints(canonicalJson(s));
const applied = (stage: string, savedChars: number): Decision => ({
  stage,
  kind: 'applied',
  reason: 'test',
  savedChars,
});

const request = (content: string) => ({
  model: 'gpt-4o',
  messages: [
    { role: 'user', content: 'run the tests' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: '{}' } }],
    },
    { role: 'tool', tool_call_id: 'c1', content },
  ],
});

describe('ToolCredits', () => {
  it('credits the stage that made a rendering in every request that shows it, and gives back the raw size', () => {
    const credits = new ToolCredits(new SessionCache(1024));
    credits.note('s', VIEW, RAW, [applied(STAGES.compressToolResult, 1)]);
    const saving = jsonChars(RAW) - jsonChars(VIEW);
    for (let i = 0; i < 3; i++) {
      const account = credits.account('s', request(VIEW), request(VIEW), counter);
      expect(account.saved).toEqual({ compressToolResult: saving });
      expect(account.rawChars).toBe(saving);
      expect(account.rawTokens).toBe(counter.count(canonicalJson(RAW)) - counter.count(canonicalJson(VIEW)));
    }
    // Another session never sees it.
    expect(credits.account('t', request(VIEW), request(VIEW), counter).saved).toEqual({});
  });

  it('credits nothing where the request finally showed the output whole (a delta restored by a request stage)', () => {
    const credits = new ToolCredits(new SessionCache(1024));
    credits.note('s', DELTA, RAW, [applied(STAGES.deltaRepeatedOutput, jsonChars(RAW) - jsonChars(DELTA))]);
    const account = credits.account('s', request(DELTA), request(RAW), counter);
    expect(account.saved).toEqual({});
    // The raw request is still the one with the output whole.
    expect(account.rawChars).toBe(jsonChars(RAW) - jsonChars(DELTA));
  });

  it('credits a request stage’s further cut to that stage, not to the tool stage', () => {
    const credits = new ToolCredits(new SessionCache(1024));
    credits.note('s', VIEW, RAW, [applied(STAGES.compressToolResult, 1)]);
    const account = credits.account(
      's',
      request(VIEW),
      request('[digest] a_0123456789abcdef0123456789abcdef'),
      counter,
    );
    expect(account.saved).toEqual({ compressToolResult: jsonChars(RAW) - jsonChars(VIEW) });
  });

  it('with the raw request (the gateway), credits a rendering another process made, by its text', () => {
    const credits = new ToolCredits(new SessionCache(1024));
    expect(credits.account('s', request(DELTA), request(DELTA), counter, request(RAW)).saved).toEqual({
      deltaRepeatedOutput: jsonChars(RAW) - jsonChars(DELTA),
    });
    expect(credits.account('s', request(VIEW), request(VIEW), counter, request(RAW)).saved).toEqual({
      compressToolResult: jsonChars(RAW) - jsonChars(VIEW),
    });
  });

  it('holds raw outputs until measured within its bound: past it, the least recently used sessions go', () => {
    const credits = new ToolCredits(new SessionCache(1024), 4096, RAW.length + 10);
    credits.note('old', VIEW, RAW, []);
    credits.note('new', VIEW, RAW, []);
    expect(credits.account('old', request(VIEW), request(VIEW), counter).saved).toEqual({});
    expect(credits.account('new', request(VIEW), request(VIEW), counter).saved).not.toEqual({});
    // Measured, a credit no longer holds its raw output: more sessions fit.
    credits.note('third', VIEW, RAW, []);
    expect(credits.account('new', request(VIEW), request(VIEW), counter).saved).not.toEqual({});
  });

  it('forgets an ended session', () => {
    const sessions = new SessionCache(1024);
    const credits = new ToolCredits(sessions);
    credits.note('s', VIEW, RAW, []);
    sessions.end('s');
    expect(credits.account('s', request(VIEW), request(VIEW), counter)).toEqual({
      rawChars: 0,
      rawTokens: 0,
      saved: {},
    });
  });
});
