/**
 * Deterministic grading: the model is asked to end with one line `ANSWER: <value>`; the value of
 * the last such line, stripped of quotes, backticks, emphasis and a trailing full stop, must equal
 * the planted fact (case and inner whitespace ignored). No partial credit and no judge model.
 */
import type { EvalTask } from './tasks.js';

/** The system prompt both arms send. */
export const SYSTEM_PROMPT =
  'You are a careful software engineering assistant. Answer from the evidence in this conversation only. ' +
  'When you know the answer, reply with a single final line of the form "ANSWER: <value>" and nothing after it.';

/** The value of the last `ANSWER:` line, normalized; undefined when there is none. */
export function extractAnswer(text: string): string | undefined {
  const matches = [...text.matchAll(/ANSWER\s*:\s*(.+)/gi)];
  const last = matches.at(-1)?.[1];
  if (last === undefined) return undefined;
  const value = normalize(last);
  return value === '' ? undefined : value;
}

function normalize(s: string): string {
  let v = s.trim().replace(/\s+/g, ' ');
  for (let i = 0; i < 3; i++)
    v = v
      .replace(/^[`"'*_]+|[`"'*_]+$/g, '')
      .replace(/\.$/, '')
      .trim();
  return v.toLowerCase();
}

/** True when the reply's answer equals the task's planted fact. */
export function grade(task: EvalTask, reply: string): boolean {
  const answer = extractAnswer(reply);
  return answer !== undefined && answer === normalize(task.expected);
}
