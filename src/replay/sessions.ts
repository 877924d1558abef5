/**
 * Recorded sessions: one JSON object per line, `{id, model?, tools?, messages: [...]}` with
 * Chat Completions messages (the corpus line format). Extra keys (source, meta) are ignored.
 */
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { TokenTerminatorError } from '../errors.js';

/** One recorded session as a replay reads it. */
export interface RecordedSession {
  readonly id: string;
  readonly model?: string;
  readonly tools?: readonly unknown[];
  readonly messages: readonly Readonly<Record<string, unknown>>[];
}

/** A sessions file line that is not a session. Names the line number, never its content. */
export class SessionFormatError extends TokenTerminatorError {
  constructor(message: string) {
    super('E_SESSION_FORMAT', message);
  }
}

/** The Chat Completions roles a recorded session may use. */
const ROLES: ReadonlySet<string> = new Set(['system', 'developer', 'user', 'assistant', 'tool', 'function']);

/**
 * Parse one line (1-based `lineNo` for errors); an unknown role is a format error, not silently replayed.
 *
 * @example
 * const session = parseSessionLine('{"id":"s1","messages":[{"role":"user","content":"hi"}]}', 1);
 */
export function parseSessionLine(line: string, lineNo: number): RecordedSession {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw new SessionFormatError(`line ${lineNo}: not valid JSON`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new SessionFormatError(`line ${lineNo}: not a JSON object`);
  const o = value as Record<string, unknown>;
  const messages = o['messages'];
  if (!Array.isArray(messages) || !messages.every((m) => typeof m === 'object' && m !== null && !Array.isArray(m))) {
    throw new SessionFormatError(`line ${lineNo}: "messages" must be an array of objects`);
  }
  messages.forEach((m, i) => {
    const role = (m as Record<string, unknown>)['role'];
    if (typeof role !== 'string' || !ROLES.has(role)) {
      const shown = typeof role === 'string' ? JSON.stringify(role.slice(0, 32)) : typeof role;
      throw new SessionFormatError(
        `line ${lineNo}: message ${i + 1} has unknown role ${shown} (expected ${[...ROLES].join(', ')})`,
      );
    }
  });
  return {
    id: typeof o['id'] === 'string' && o['id'] !== '' ? o['id'] : `session-${lineNo}`,
    messages: messages as Record<string, unknown>[],
    ...(typeof o['model'] === 'string' ? { model: o['model'] } : {}),
    ...(Array.isArray(o['tools']) ? { tools: o['tools'] as unknown[] } : {}),
  };
}

/**
 * Read up to `limit` sessions from a JSONL file (blank lines skipped).
 *
 * @example
 * const sessions = await readSessions('sessions.jsonl', 10);
 */
export async function readSessions(path: string, limit = Infinity): Promise<RecordedSession[]> {
  const out: RecordedSession[] = [];
  const lines = createInterface({ input: createReadStream(path, { encoding: 'utf8' }), crlfDelay: Infinity });
  let lineNo = 0;
  try {
    for await (const line of lines) {
      lineNo++;
      if (line.trim() === '') continue;
      if (out.length >= limit) break;
      out.push(parseSessionLine(line, lineNo));
    }
  } finally {
    lines.close();
  }
  return out;
}
