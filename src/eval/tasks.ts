/**
 * The harness's synthetic tasks: a question and one large tool output with a planted fact whose
 * answer is graded by exact match — the failing test's name, the line a function is defined on,
 * the version of one package, how many error lines one component logged. Every task is a pure
 * function of (seed, index): the same seed always gives the same prompts and evidence.
 *
 * The evidence is built to look like what agents really read (a test runner's output, `cat -n`,
 * `npm ls`, a service log) and to be large enough that the balanced mode vaults it — except the
 * `cat -n` file read, which balanced mode shows whole (a file the agent asked to read:
 * docs/fidelity.md), so in that family both arms see the same evidence.
 */
import { prng } from '../prng.js';

export const TASK_FAMILIES = ['failing-test', 'line-number', 'version', 'count'] as const;
export type TaskFamily = (typeof TASK_FAMILIES)[number];

export interface EvalTask {
  readonly index: number;
  readonly family: TaskFamily;
  /** The user's question (the same in both arms). */
  readonly question: string;
  /** The command the transcript shows the agent running; its output is `evidence`. */
  readonly command: string;
  readonly evidence: string;
  /** The graded answer. */
  readonly expected: string;
  /** Strings of the evidence that must all be visible to derive the answer (what a reader needs). */
  readonly needs: readonly string[];
}

const WORDS = [
  'lease',
  'vault',
  'token',
  'cache',
  'route',
  'merge',
  'queue',
  'parse',
  'index',
  'shard',
  'batch',
  'delta',
  'frame',
  'stream',
  'prefix',
  'budget',
  'ledger',
  'replay',
  'tenant',
  'cursor',
];
const VERBS = [
  'rejects',
  'keeps',
  'drops',
  'retries',
  'rotates',
  'flushes',
  'pins',
  'splits',
  'counts',
  'renders',
  'verifies',
  'expires',
];
const AREAS = ['vault', 'compile', 'budget', 'recovery', 'proxy', 'measure', 'receipts', 'telemetry'];
const COMPONENTS = [
  'payment-gateway',
  'auth-service',
  'search-indexer',
  'mail-relay',
  'billing-worker',
  'image-resizer',
  'feed-builder',
  'quota-keeper',
];

type Rnd = () => number;
const pick = <T>(r: Rnd, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
const int = (r: Rnd, lo: number, hi: number): number => lo + Math.floor(r() * (hi - lo + 1));

/** `count` tasks for one seed, families in rotation so every family is equally represented. */
export function makeTasks(seed: number, count: number): EvalTask[] {
  return Array.from({ length: count }, (_, i) => makeTask(seed, i));
}

/** Task `index` of `seed`. */
export function makeTask(seed: number, index: number): EvalTask {
  // Each task has its own stream, so task i does not depend on how many came before it.
  const r = prng((seed ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0);
  const family = TASK_FAMILIES[index % TASK_FAMILIES.length]!;
  return { index, family, ...BUILDERS[family](r, `${index + 1}`) };
}

/** A family's task body from its stream and its tag (the 1-based index that makes names unique). */
type TaskBody = Omit<EvalTask, 'index' | 'family'>;

const BUILDERS: Record<TaskFamily, (r: Rnd, tag: string) => TaskBody> = {
  'failing-test': failingTest,
  'line-number': lineNumber,
  version,
  count: countErrors,
};

function failingTest(r: Rnd, tag: string): TaskBody {
  const total = int(r, 160, 220);
  const failAt = int(r, Math.floor(total * 0.2), Math.floor(total * 0.8));
  const lines: string[] = [];
  let expected = '';
  let failed = '';
  for (let i = 0; i < total; i++) {
    const area = pick(r, AREAS);
    const name = `${pick(r, VERBS)} ${pick(r, WORDS)} ${pick(r, WORDS)} ${i}_${tag}`;
    const file = `test/${area}/${pick(r, WORDS)}.test.ts`;
    if (i === failAt) {
      expected = name;
      failed = `${file} > ${area} > ${name}`;
      lines.push(` × ${failed} ${int(r, 3, 90)}ms`);
    } else {
      lines.push(` ✓ ${file} > ${area} > ${name} ${int(r, 1, 40)}ms`);
    }
  }
  const evidence = [
    ...lines,
    '',
    ` FAIL  ${failed}`,
    `AssertionError: expected ${int(r, 2, 9)} to be ${int(r, 10, 19)} // Object.is equality`,
    '',
    ` Test Files  1 failed | ${int(r, 30, 60)} passed`,
    `      Tests  1 failed | ${total - 1} passed (${total})`,
  ].join('\n');
  return {
    question: `Task ${tag}: the test run below has exactly one failing test. What is the name of the failing test case (the text after the last " > ", without the duration)?`,
    command: 'npx vitest run',
    evidence,
    expected,
    needs: [expected],
  };
}

function lineNumber(r: Rnd, tag: string): TaskBody {
  const total = int(r, 320, 420);
  const target = int(r, Math.floor(total * 0.3), Math.floor(total * 0.7));
  const fn = `${pick(r, VERBS)}${cap(pick(r, WORDS))}${cap(pick(r, WORDS))}${tag}`;
  const file = `src/${pick(r, AREAS)}/${pick(r, WORDS)}-${tag}.ts`;
  const out: string[] = [];
  let needed = '';
  for (let i = 1; i <= total; i++) {
    const body =
      i === target
        ? `export function ${fn}(input: Readonly<Record<string, unknown>>): number {`
        : i % 11 === 0
          ? `export function helper${i}(x: number): number {`
          : i % 11 === 1
            ? '}'
            : `  const ${pick(r, WORDS)}${i} = ${pick(r, WORDS)}.${pick(r, VERBS)}(${int(r, 0, 999)});`;
    const line = `${String(i).padStart(6)}\t${body}`;
    if (i === target) needed = line;
    out.push(line);
  }
  return {
    question: `Task ${tag}: on which line of ${file} is the function ${fn} defined? Answer with the line number only.`,
    command: `cat -n ${file}`,
    evidence: out.join('\n'),
    expected: String(target),
    needs: [needed],
  };
}

function version(r: Rnd, tag: string): TaskBody {
  const total = int(r, 300, 380);
  const targetAt = int(r, Math.floor(total * 0.3), Math.floor(total * 0.7));
  const pkg = `@acme/${pick(r, WORDS)}-${pick(r, WORDS)}-${tag}`;
  const ver = `${int(r, 1, 9)}.${int(r, 0, 30)}.${int(r, 0, 40)}`;
  const lines = ['my-app@1.0.0 /srv/my-app'];
  let needed = '';
  for (let i = 0; i < total; i++) {
    const depth = i % 5 === 0 ? 0 : int(r, 1, 3);
    const prefix = `${'│   '.repeat(depth)}${i % 7 === 6 ? '└──' : '├──'} `;
    if (i === targetAt) {
      needed = `${prefix}${pkg}@${ver}`;
      lines.push(needed);
    } else {
      lines.push(
        `${prefix}${pick(r, WORDS)}-${pick(r, WORDS)}-${i}@${int(r, 0, 12)}.${int(r, 0, 30)}.${int(r, 0, 40)}${i % 13 === 0 ? ' deduped' : ''}`,
      );
    }
  }
  return {
    question: `Task ${tag}: which version of ${pkg} is installed? Answer with the version only (like 1.2.3).`,
    command: 'npm ls --all',
    evidence: lines.join('\n'),
    expected: ver,
    needs: [needed],
  };
}

function countErrors(r: Rnd, tag: string): TaskBody {
  const total = int(r, 260, 340);
  const component = `${pick(r, COMPONENTS)}-${tag}`;
  const k = int(r, 3, 9);
  const at = new Set<number>();
  while (at.size < k) at.add(int(r, 5, total - 5));
  const lines: string[] = [];
  const needs: string[] = [];
  for (let i = 0; i < total; i++) {
    const ts = `2026-11-${String(1 + (i % 28)).padStart(2, '0')}T${String(i % 24).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}:${String((i * 7) % 60).padStart(2, '0')}Z`;
    if (at.has(i)) {
      const line = `${ts} ERROR [${component}] request ${int(r, 10000, 99999)} failed: upstream timeout after ${int(r, 5, 60)}s`;
      needs.push(line);
      lines.push(line);
    } else if (i % 97 === 13) {
      lines.push(`${ts} WARN  [${component}] slow response ${int(r, 900, 4000)}ms`);
    } else {
      lines.push(
        `${ts} ${i % 3 === 0 ? 'DEBUG' : 'INFO '} [${pick(r, COMPONENTS)}] ${pick(r, VERBS)} ${pick(r, WORDS)} id=${int(r, 1000, 9999)}`,
      );
    }
  }
  return {
    question: `Task ${tag}: how many ERROR lines from the component ${component} does the log contain? Answer with the number only.`,
    command: `journalctl -u ${component.replace(/-\d+$/, '')} --since today`,
    evidence: lines.join('\n'),
    expected: String(k),
    needs,
  };
}

function cap(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}
