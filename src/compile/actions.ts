/**
 * Assistant actions, as the fidelity contract names them: every tool call (name and arguments) and,
 * for agents that speak a text protocol (SWE-agent, mini-swe-agent), every fenced command block in
 * the assistant's text. The request stages never change them; `replay` and the testing kit check
 * that they reach the model verbatim.
 */
import { codePoints } from '../measure/index.js';
import { isObj } from '../model/read.js';

/** A fenced code block (```lang … ```), its body captured; unclosed fences are not blocks. */
const FENCED = /^[ \t]*```[^\n`]*\n([\s\S]*?)^[ \t]*```[ \t]*$/gm;

/** The bodies of the fenced code blocks of a text, untrimmed, in order. */
export function fencedBlocks(text: string): string[] {
  return [...text.matchAll(FENCED)].map((m) => m[1]!.replace(/\n$/, ''));
}

/** Spans [start, end) of the fenced blocks of a text, fences included. */
export function fencedSpans(text: string): [number, number][] {
  return [...text.matchAll(FENCED)].map((m) => [m.index, m.index + m[0].length]);
}

/** Assistant prose below this many code points is left alone (a receipt would not be smaller). */
export const REASONING_MIN_CHARS = 300;

/** Code points of a text outside its fenced blocks. */
export function proseChars(text: string): number {
  return codePoints(text) - fencedSpans(text).reduce((n, [a, b]) => n + codePoints(text.slice(a, b)), 0);
}

/**
 * An old assistant text as a reasoning rewrite shows it: a note with `size` (code points) and the
 * `receipt` line, then the text's fenced blocks verbatim (none when `blocks` is false).
 */
export function reasoningRendering(text: string, receipt: string, size: number, blocks = true): string {
  const kept = blocks ? fencedSpans(text).map(([a, b]) => text.slice(a, b)) : [];
  const note = `[Token Terminator reasoning of an earlier turn (${size} chars) | ${receipt.slice(1, -1)}]`;
  return [note, ...kept].join('\n');
}

type Obj = Readonly<Record<string, unknown>>;

/** The readable text of a message content: the string, or its text parts joined by newlines. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter(
      (p): p is Obj =>
        isObj(p) && (p['type'] === 'text' || p['type'] === 'output_text') && typeof p['text'] === 'string',
    )
    .map((p) => p['text'] as string)
    .join('\n');
}

/**
 * The action strings of one Chat Completions assistant message, as `replay` measures them: each
 * tool call's arguments string; for a message without tool calls, each fenced block's body, trimmed.
 */
export function chatActions(message: Obj): string[] {
  const calls = message['tool_calls'];
  if (Array.isArray(calls) && calls.length > 0) {
    return calls.flatMap((c) => {
      const fn = isObj(c) ? c['function'] : undefined;
      const args = isObj(fn) ? fn['arguments'] : undefined;
      return typeof args === 'string' ? [args] : [];
    });
  }
  return fencedBlocks(textOf(message['content']))
    .map((b) => b.trim())
    .filter((b) => b !== '');
}
