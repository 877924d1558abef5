/**
 * Tool calls and their results as the tool stream sees them: `ToolCall` before the host runs the
 * tool, `ToolResult` after. Arguments have the shapes Hermes-style hosts use (terminal `command`
 * and `cwd`, search `pattern`/`path`, `read_file` `path`).
 */
import fc from 'fast-check';
import type { ToolCall, ToolResult } from '../../step.js';
import { expandOutput, outputSpec, shapeForTool, type SizeClass } from './text.js';
import { describeValue, withSummary } from './summary.js';

/** Host tool names the kit draws from. `noisy_probe` stands for a third-party tool with chatty output. */
export const TOOL_NAMES = ['terminal', 'search_files', 'read_file', 'process', 'web_search', 'noisy_probe'] as const;

const COMMANDS = [
  'git status',
  'git diff',
  'git log --oneline -n 50',
  'npm test',
  'npx vitest run',
  'pytest -q',
  'cargo test',
  'ls -la',
  'rg -n TODO src',
  'find . -name "*.ts"',
  'tsc --noEmit',
  'rtk git status',
];
const CWDS = ['/work/app', '/home/dev/project', '/tmp/repo'];

/** Options of the tool call and tool event arbitraries; every field is optional. */
export interface ToolEventOptions {
  /** Tool names to draw from. @defaultValue {@link TOOL_NAMES} */
  readonly tools?: readonly string[];
  /** Output size classes. @defaultValue tiny, medium and large */
  readonly sizes?: readonly SizeClass[];
  /** Terminal commands to draw from (e.g. ones a stub knows). @defaultValue common git/npm/pytest/ls/rg commands */
  readonly commands?: readonly string[];
  /**
   * Working directories for terminal `cwd` args (use real ones when the operator runs processes there).
   *
   * @defaultValue three made-up paths
   */
  readonly cwds?: readonly string[];
}

/**
 * Arguments for a tool of this name.
 *
 * @example
 * import { toolArgs } from 'token-terminator/testing';
 * import fc from 'fast-check';
 * fc.sample(toolArgs('terminal', ['npm test']), 1); // [{ command: 'npm test', cwd: … }]
 */
export function toolArgs(
  name: string,
  commands: readonly string[] = COMMANDS,
  cwds: readonly string[] = CWDS,
): fc.Arbitrary<Record<string, unknown>> {
  switch (name) {
    case 'terminal':
      return fc.record(
        { command: fc.constantFrom(...commands), cwd: fc.constantFrom(...cwds) },
        { requiredKeys: ['command'] },
      );
    case 'search_files':
      return fc.record({
        pattern: fc.constantFrom('TODO', 'vault', 'export function', 'écrire'),
        path: fc.constantFrom('src', '.', 'test'),
      });
    case 'read_file':
      return fc.record({ path: fc.constantFrom('src/index.ts', 'README.md', 'docs/guide.md') });
    case 'process':
      return fc.record({ action: fc.constantFrom('poll', 'log'), session_id: fc.constantFrom('proc_1', 'proc_2') });
    default:
      return fc.dictionary(
        fc.constantFrom('query', 'limit', 'verbose'),
        fc.oneof(fc.string({ maxLength: 12 }), fc.nat(50), fc.boolean()),
        {
          maxKeys: 3,
        },
      );
  }
}

/**
 * A tool call with realistic arguments. `id` is unique within one generated stream when `index` is given.
 *
 * @example
 * fc.sample(toolCall({ tools: ['terminal'] }), 3);
 */
export function toolCall(options: ToolEventOptions = {}, index = 0): fc.Arbitrary<ToolCall> {
  const tools = options.tools ?? TOOL_NAMES;
  return fc
    .constantFrom(...tools)
    .chain((name) =>
      fc.record({
        name: fc.constant(name),
        args: toolArgs(name, options.commands, options.cwds),
        nonce: fc.nat(0xffff),
      }),
    )
    .map(({ name, args, nonce }) => ({ id: `call_${index}_${nonce.toString(16)}`, name, args }));
}

/** A matching call/result pair: same id, name and args; the output fits the tool. */
export interface ToolEventPair {
  readonly call: ToolCall;
  readonly result: ToolResult;
}

/**
 * A tool call together with the result it produced (terminal results sometimes carry an exit code).
 *
 * @example
 * fc.assert(fc.property(toolEventPair({ tools: ['terminal'] }), ({ call, result }) => result.callId === call.id));
 */
export function toolEventPair(options: ToolEventOptions = {}, index = 0): fc.Arbitrary<ToolEventPair> {
  return toolCall(options, index).chain((call) =>
    fc
      .record({
        spec: outputSpec({ shapes: shapeForTool(call.name), sizes: options.sizes }),
        exitCode:
          call.name === 'terminal'
            ? fc.option(fc.constantFrom(0, 1, 2, 101), { nil: undefined })
            : fc.constant(undefined),
      })
      .map(({ spec, exitCode }) => {
        const base = { callId: call.id, name: call.name, args: call.args, content: expandOutput(spec) };
        const result: ToolResult = exitCode === undefined ? base : { ...base, exitCode };
        return { call, result };
      }),
  );
}

/** Options of the tool-stream arbitraries: those of {@link ToolEventOptions} plus the stream length. */
export interface ToolStreamOptions extends ToolEventOptions {
  /** Fewest events per stream. @defaultValue 1 */
  readonly minLength?: number;
  /** Most events per stream. @defaultValue 6 */
  readonly maxLength?: number;
}

/**
 * A stream of tool results as one session produces them. Some results repeat an earlier
 * observation exactly and some repeat it with a few lines changed (the same command run twice),
 * so temporal deltas and duplicate handling get exercised.
 *
 * @example
 * test.prop([toolResultStream({ maxLength: 4 })])('fails open', async (results) => { … });
 */
export function toolResultStream(options: ToolStreamOptions = {}): fc.Arbitrary<readonly ToolResult[]> {
  const min = options.minLength ?? 1;
  const max = options.maxLength ?? 6;
  // Half the stream is fresh observations, the rest re-runs them: repeats are what deltas act on.
  const fresh = fc.array(toolEventPair(options), { minLength: min, maxLength: Math.max(min, Math.ceil(max / 2)) });
  const edits = fc.array(
    fc.record({
      from: fc.nat(),
      kind: fc.constantFrom('same', 'edit', 'new'),
      line: fc.nat(),
      text: fc.string({ maxLength: 20 }),
    }),
    {
      maxLength: max,
    },
  );
  return fc.tuple(fresh, edits).map(([pairs, repeats]) => {
    const results: ToolResult[] = pairs.map((p, i) => ({ ...p.result, callId: `${p.result.callId}_${i}` }));
    for (const r of repeats) {
      if (results.length >= max || r.kind === 'new') continue;
      const src = results[r.from % results.length]!;
      const content = r.kind === 'same' ? src.content : editLine(src.content, r.line, r.text);
      results.push({ ...src, callId: `${src.callId}_r${results.length}`, content });
    }
    return withSummary(
      results,
      () => `tool results: ${results.map((x) => `${x.name}(${describeValue(x.content)})`).join(', ')}`,
    );
  });
}

/**
 * A stream of tool calls (what a rewrite stage sees).
 *
 * @example
 * test.prop([toolCallStream({ tools: ['terminal'] })])('rewrites only commands', async (calls) => { … });
 */
export function toolCallStream(options: ToolStreamOptions = {}): fc.Arbitrary<readonly ToolCall[]> {
  const min = options.minLength ?? 1;
  const max = options.maxLength ?? 6;
  return fc
    .array(fc.nat(), { minLength: min, maxLength: max })
    .chain((xs) => fc.tuple(...xs.map((_, i) => toolCall(options, i))))
    .map((calls) =>
      withSummary(
        calls,
        () =>
          `tool calls: ${calls.map((c) => `${c.name}${c.name === 'terminal' ? `(${String(c.args['command'])})` : ''}`).join(', ')}`,
      ),
    );
}

function editLine(text: string, line: number, replacement: string): string {
  const lines = text.split('\n');
  const at = line % lines.length;
  lines[at] = `${lines[at] ?? ''} ${replacement}`.trimEnd() + ' (changed)';
  return lines.join('\n');
}
