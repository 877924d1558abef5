/**
 * Report test input: a real `replay --series` run over a few recorded sessions (so every current
 * key has its real shape), plus the fidelity figures and the two pricing profiles the fidelity
 * work adds, per session and in total. A canary string sits in every tool output: it must never
 * reach a report.
 */
import { readSessions, replaySessions, type RecordedSession } from '../../src/replay/index.js';

export const CANARY = 'CANARY-7f3e-do-not-render';

function syntheticSession(id: string, lines: number): RecordedSession {
  const big = Array.from({ length: lines }, (_, i) => `src/m_${i % 13}.ts:${i}: ${CANARY} value ${i % 7}`).join('\n');
  const messages: Record<string, unknown>[] = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: `Find the value (${id}).` },
  ];
  for (let k = 0; k < 3; k++) {
    messages.push({
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: `c${k}`, type: 'function', function: { name: 'search_files', arguments: `{"pattern": "value ${k}"}` } },
      ],
    });
    messages.push({ role: 'tool', tool_call_id: `c${k}`, content: `${big}\n# pass ${k}` });
  }
  messages.push({ role: 'assistant', content: 'Done.' });
  return { id, model: 'gpt-4o', messages };
}

/** Fidelity and pricing-profile figures as the fidelity work defines them (values are made up, keys are not). */
function withFidelity(level: object, salt: number): Record<string, unknown> {
  return {
    ...level,
    task_visible_pct: 100,
    actions_visible_pct: 100 - salt * 0.25,
    diagnostics_visible_pct: 99.5 + salt * 0.1,
    grounding_pct: 98.75,
    prefix_reuse: 0.9712 - salt * 0.001,
    effective_cost_ratio_openai: 0.5312 + salt * 0.01,
    effective_cost_ratio_anthropic: 0.5634 + salt * 0.01,
  };
}

/** The figures (as `replay --json --series` would print them, extended), from `samplePath` plus two synthetic sessions. */
export async function reportFixture(
  samplePath: string,
): Promise<Record<string, unknown> & { sessions: Record<string, unknown>[] }> {
  const sessions = [
    ...(await readSessions(samplePath)),
    syntheticSession('synthetic:small', 120),
    syntheticSession('synthetic:large', 700),
  ];
  const figures = await replaySessions(sessions, { series: true, ledger: false });
  const { sessions: perSession, ...top } = figures;
  return { ...withFidelity(top, 0), sessions: perSession.map((s, i) => withFidelity(s, i + 1)) };
}
