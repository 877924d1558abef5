import { describe, expect, it } from 'vitest';
import { Agent, toolOutput } from '../../bench/proxy-load.js';

type Body = { model: string; messages: { role: string; content: unknown; tool_call_id?: string }[] };

describe('bench proxy-load: an agent grows its body in one buffer', () => {
  it('sends the whole conversation so far every turn, as JSON, and starts a new session after maxTurns', () => {
    const agent = new Agent('a', 3);
    const kept: Body[] = [];
    for (let turn = 0; turn < 7; turn++) {
      const copy = Buffer.from(agent.next());
      const body = JSON.parse(copy.toString('utf8')) as Body;
      kept.push(body);
      const t = turn % 3;
      expect(body.model).toBe('gpt-4o');
      expect(body.messages).toHaveLength(2 + 2 * (t + 1));
      expect(body.messages.at(-1)).toEqual({
        role: 'tool',
        tool_call_id: `call_${t}`,
        content: toolOutput(agent.session, t),
      });
    }
    expect(agent.sessions.map((s) => s.header)).toEqual(['a-0', 'a-1', 'a-2']);
    // Each body extends the one before it within a session; a new session starts from its own opening.
    expect(kept[2]!.messages.slice(0, 6)).toEqual(kept[1]!.messages);
    expect(kept[3]!.messages[0]).toEqual({ role: 'system', content: 'You are coding agent a-1. Use the terminal.' });
  });

  it('grows past its first buffer without losing what it held', () => {
    const agent = new Agent('big', 40);
    let body: Body | undefined;
    for (let turn = 0; turn < 40; turn++) body = JSON.parse(agent.next().toString('utf8')) as Body;
    expect(body!.messages).toHaveLength(82);
    expect(body!.messages[3]!.content).toBe(toolOutput('big-0', 0));
    expect(body!.messages[81]!.content).toBe(toolOutput('big-0', 39));
  });
});
