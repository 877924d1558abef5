/**
 * Regenerates sample.jsonl: a recorded coding-agent session (Chat Completions shape, one session
 * per line) whose tool outputs are real command output captured on this repository.
 * Run from the package root: `npx tsx examples/sessions/make-sample.ts`.
 */
import { execSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';

function sh(command: string): string {
  try {
    return execSync(command, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; status?: number };
    return `${e.stdout ?? ''}${e.stderr ?? ''}`;
  }
}

type Msg = Record<string, unknown>;
const messages: Msg[] = [
  {
    role: 'system',
    content:
      'You are a careful coding agent working in a TypeScript repository. Use the tools to inspect files, search and run commands. Keep answers short and cite the evidence you used.',
  },
  {
    role: 'user',
    content:
      'The operator kit in this repo must stay order-preserving and fail-open. Review how it is used and how RxJS concatMap behaves, check the build, and tell me what breaks.',
  },
];
let n = 0;
function call(text: string, name: string, args: Record<string, unknown>, output: string): void {
  n += 1;
  const id = `call_${String(n).padStart(2, '0')}`;
  messages.push({
    role: 'assistant',
    content: text,
    tool_calls: [{ id, type: 'function', function: { name, arguments: JSON.stringify(args) } }],
  });
  messages.push({ role: 'tool', tool_call_id: id, content: output });
}
const bash = (text: string, command: string): void => call(text, 'bash', { command }, sh(command));
const read = (text: string, path: string): void => call(text, 'read_file', { path }, sh(`cat -n ${path}`));
const search = (text: string, pattern: string, path: string): void =>
  call(text, 'search_files', { pattern, path, mode: 'content' }, sh(`grep -rn ${JSON.stringify(pattern)} ${path}`));

bash(
  'First the layout of the package and of the kysely build.',
  'ls -R src operators test bench node_modules/kysely/dist/esm',
);
bash('Recent history.', 'git log --stat -n 6');
read('The operator kit itself.', 'src/operator-kit.ts');
search('Every exported operator in rxjs.', 'export function', 'node_modules/rxjs/src/internal/operators');
read('And the Step contract.', 'src/step.ts');
read('How Observable.subscribe wires a subscriber.', 'node_modules/rxjs/src/internal/Observable.ts');
bash('Type-check the whole project.', 'npx tsc --noEmit -p . 2>&1 | head -400');
search(
  'How subscribers are finalized in rxjs operators.',
  'createOperatorSubscriber',
  'node_modules/rxjs/src/internal/operators',
);
bash('Working tree state.', 'git status');
messages.push({ role: 'user', content: 'Also look at mergeInternals, then re-run the checks.' });
read('mergeInternals is what concatMap delegates to.', 'node_modules/rxjs/src/internal/operators/mergeInternals.ts');
bash('Layout again, to be sure nothing moved.', 'ls -R src operators test bench node_modules/kysely/dist/esm');
search(
  'Again the finalize helpers, now with context.',
  'createOperatorSubscriber',
  'node_modules/rxjs/src/internal/operators',
);
bash('Run the existing tests.', 'npx vitest run test/operator-kit.test.ts test/receipts 2>&1 | tail -40');
bash('Type-check again.', 'npx tsc --noEmit -p . 2>&1 | head -400');
read('One more look at the operator kit before answering.', 'src/operator-kit.ts');
read('And Observable.ts once more for the error path.', 'node_modules/rxjs/src/internal/Observable.ts');
bash('Final state of the tree.', 'git status');
messages.push({ role: 'user', content: 'Summarize what you found in three bullet points.' });
bash('Last diff summary.', 'git log --stat -n 6');
messages.push({
  role: 'assistant',
  content:
    '- The kit preserves order through concatMap and turns throws into failed_open decisions.\n- Type errors come only from modules that are not written yet.\n- Tests for the kit and receipts pass.',
});

const session = {
  id: 'example:token-terminator-self-review#0',
  model: 'gpt-4o-2024-08-06',
  meta: { agent: 'example', note: 'real command output captured on this repository' },
  messages,
};
writeFileSync(new URL('./sample.jsonl', import.meta.url), `${JSON.stringify(session)}\n`);
console.log(`wrote ${messages.length} messages, ${messages.filter((m) => m.role === 'tool').length} tool results`);
