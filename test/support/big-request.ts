/**
 * The large request of issue 49: one chat turn whose assistant ran `outputs` terminal commands, each
 * answered by `outputChars` characters of a captured failing build or test log (repeated to size),
 * under the artifact ceiling (2,000,000) and, 15 of 1.9 MB, under the body limit (32 MiB). Every
 * output starts with a line naming `tag` and its index, so no two requests or outputs share content.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { FIXTURE_COMMANDS } from '../fixtures/terminal/commands.js';

const DIR = resolve(import.meta.dirname, '..', 'fixtures', 'terminal');
const LOGS = [
  'pytest-assert-fail.txt',
  'mvn-test-fail.txt',
  'cargo-test-fail.txt',
  'go-test-fail.txt',
  'tsc-errors.txt',
];
const texts = new Map<string, string>();

function log(name: string, tag: string, chars: number): string {
  let base = texts.get(name);
  if (base === undefined) {
    base = readFileSync(join(DIR, name), 'utf8');
    texts.set(name, base);
  }
  const head = `# run ${tag}\n`;
  return (head + base.repeat(Math.ceil(chars / base.length) + 1)).slice(0, chars);
}

/** The JSON body (bytes) of one such request. */
export function bigRequest(tag: string, outputs = 15, outputChars = 1_900_000): Buffer {
  const calls = Array.from({ length: outputs }, (_, i) => {
    const name = LOGS[i % LOGS.length]!;
    return { id: `call_${tag}_${i}`, name, command: FIXTURE_COMMANDS[name]!.command };
  });
  const messages: Record<string, unknown>[] = [
    { role: 'system', content: `You are a coding agent (${tag}). Use the terminal.` },
    { role: 'user', content: 'Run every test suite and tell me what fails.' },
    {
      role: 'assistant',
      content: null,
      tool_calls: calls.map((c) => ({
        id: c.id,
        type: 'function',
        function: { name: 'terminal', arguments: JSON.stringify({ command: c.command }) },
      })),
    },
    ...calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: log(c.name, `${tag}/${c.id}`, outputChars) })),
  ];
  return Buffer.from(JSON.stringify({ model: 'gpt-4o', messages }));
}
