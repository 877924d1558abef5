/**
 * `npm run bench -- views [sessions.jsonl] [--min n] [--verbose]`: the first view the model gets of every large
 * tool output, through the tool-result stream with the default config (balanced), in two sets:
 *
 * - the captured terminal fixtures (test/fixtures/terminal, most of them failing runs);
 * - every tool output of a recorded sessions file of at least `--min` chars (default 4000).
 *
 * Per set: tokens before/after (o200k_base), and two fidelity counts measured with definitions of
 * this file only (independent of the compactors' own classifier):
 * - diagnostic lines: lines matching a broad failure pattern (below), at most the first 20 per
 *   output, present verbatim as a line of the view (a pass-through keeps them all). Lines that are
 *   only a path (a file listing naming `FooException.java`) are counted apart;
 * - grounding: the strings the agent's next 3 actions took from the output (identifiers and paths
 *   of ≥ 4 chars, numbers of ≥ 2 digits, found in the output and nowhere earlier in the session),
 *   present in the view.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTiktokenCounter } from '../src/measure/index.js';
import { readSessions } from '../src/replay/index.js';
import { REPLAY_TOOL_NAMES } from '../src/tools/names.js';
import { createTerminator } from '../src/runtime/index.js';
import { FIXTURE_COMMANDS } from '../test/fixtures/terminal/commands.js';

const BROAD =
  /\b(?:error|errors|exception|fail|failed|failure|failures|traceback|panic|panicked|caused by|assert\w*)\b|^E\s|^npm ERR!/i;
const PATH_ONLY = /^[\w./@$-]*\/?[\w.@$-]+\.\w+$|^[\w.@$-]+\.\w+$/;

interface Tally {
  outputs: number;
  rawTok: number;
  viewTok: number;
  diag: number;
  diagKept: number;
  pathDiag: number;
  pathDiagKept: number;
  ground: number;
  groundKept: number;
}

const tally = (): Tally => ({
  outputs: 0,
  rawTok: 0,
  viewTok: 0,
  diag: 0,
  diagKept: 0,
  pathDiag: 0,
  pathDiagKept: 0,
  ground: 0,
  groundKept: 0,
});

function countDiagnostics(t: Tally, raw: string, view: string): void {
  const viewLines = new Set(view.split(/\r?\n/));
  const diag = raw
    .split(/\r?\n/)
    .filter((l) => l.trim() !== '' && BROAD.test(l))
    .slice(0, 20);
  for (const line of diag) {
    const kept = view === raw || viewLines.has(line);
    if (PATH_ONLY.test(line.trim())) {
      t.pathDiag += 1;
      if (kept) t.pathDiagKept += 1;
    } else {
      t.diag += 1;
      if (kept) t.diagKept += 1;
    }
  }
}

const STRINGS = /[A-Za-z_][\w$]*(?:[./-][\w$]+)*|\d{2,}/g;

function learned(raw: string, earlier: string, actions: readonly string[]): string[] {
  const out = new Set<string>();
  for (const action of actions) {
    for (const m of action.matchAll(STRINGS)) {
      const s = m[0];
      if ((/^\d/.test(s) || s.length >= 4) && raw.includes(s) && !earlier.includes(s)) out.add(s);
    }
  }
  return [...out];
}

export async function main(argv: string[]): Promise<void> {
  const path =
    argv.find((a, i) => !a.startsWith('--') && (i === 0 || argv[i - 1] !== '--min')) ??
    'examples/sessions/sample.jsonl';
  const minIndex = argv.indexOf('--min');
  const min = minIndex >= 0 ? Number(argv[minIndex + 1]) : 4000;
  const verbose = argv.includes('--verbose');
  const dir = mkdtempSync(join(tmpdir(), 'tt-bench-views-'));
  const counter = createTiktokenCounter('o200k_base');
  const tok = (s: string): number => counter.count(s);
  const tt = await createTerminator({
    overrides: { dbPath: join(dir, 'vault.sqlite3') },
    metrics: false,
    vaultErrors: 'throw',
  });
  const sets = new Map<string, Tally>();
  const add = (name: string): Tally => sets.get(name) ?? (sets.set(name, tally()), sets.get(name)!);
  try {
    const fixtures = join(dirname(fileURLToPath(import.meta.url)), '../test/fixtures/terminal');
    for (const file of readdirSync(fixtures)
      .filter((f) => f.endsWith('.txt'))
      .sort()) {
      const spec = FIXTURE_COMMANDS[file];
      if (spec === undefined) continue;
      const content = readFileSync(join(fixtures, file), 'utf8');
      const step = await tt.reduceToolResult(
        {
          callId: file,
          name: 'terminal',
          args: { command: spec.command },
          content,
          ...(spec.exitCode === undefined ? {} : { exitCode: spec.exitCode }),
        },
        { sessionId: `fixture-${file}` },
      );
      const t = add(spec.exitCode !== undefined && spec.exitCode !== 0 ? 'fixtures, failing runs' : 'fixtures, other');
      t.outputs += 1;
      t.rawTok += tok(content);
      t.viewTok += tok(step.value.content);
      countDiagnostics(t, content, step.value.content);
    }

    for (const session of await readSessions(path)) {
      const calls = new Map<string, { name: string; args: Record<string, unknown>; text: string }>();
      const messages = session.messages;
      let earlier = '';
      for (let i = 0; i < messages.length; i += 1) {
        const m = messages[i]!;
        for (const c of (m['tool_calls'] as
          { id: string; function: { name: string; arguments: string } }[] | undefined) ?? []) {
          const args = JSON.parse(c.function.arguments || '{}') as Record<string, unknown>;
          calls.set(c.id, { name: c.function.name, args, text: c.function.arguments });
        }
        const content = typeof m['content'] === 'string' ? m['content'] : '';
        if (m['role'] !== 'tool') {
          earlier += `\n${content}${JSON.stringify(m['tool_calls'] ?? '')}`;
          continue;
        }
        const call = calls.get(String(m['tool_call_id']));
        const name = REPLAY_TOOL_NAMES[call?.name ?? ''] ?? call?.name ?? 'tool';
        const step = await tt.reduceToolResult(
          { callId: String(m['tool_call_id']), name, args: call?.args ?? {}, content },
          { sessionId: session.id },
        );
        if (content.length >= min) {
          const t = add(`corpus ${call?.name ?? 'tool'} ≥ ${min}`);
          t.outputs += 1;
          t.rawTok += tok(content);
          t.viewTok += tok(step.value.content);
          countDiagnostics(t, content, step.value.content);
          const next = messages
            .slice(i + 1)
            .filter((x) => x['role'] === 'assistant')
            .slice(0, 3);
          const actions = next.map(
            (x) => `${typeof x['content'] === 'string' ? x['content'] : ''} ${JSON.stringify(x['tool_calls'] ?? '')}`,
          );
          const strings = learned(content, earlier, actions);
          t.ground += strings.length;
          const lost = strings.filter((s) => !step.value.content.includes(s));
          t.groundKept += strings.length - lost.length;
          if (verbose && lost.length > 0)
            console.log(
              `lost ${lost.length}/${strings.length} after ${String(call?.args['raw_action'] ?? call?.args['command'] ?? '').slice(0, 60)}: ${lost.slice(0, 8).join(' ')}`,
            );
        }
        earlier += `\n${content}`;
      }
    }
  } finally {
    counter.dispose?.();
    await tt.close();
    rmSync(dir, { recursive: true, force: true });
  }
  const pct = (a: number, b: number): string => (b === 0 ? '—' : `${((a / b) * 100).toFixed(1)} %`);
  const rows = [
    [
      'set',
      'outputs',
      'raw tok',
      'view tok',
      'reduction',
      'diagnostic lines kept',
      'path-only lines kept',
      'grounding kept',
    ],
  ];
  for (const [name, t] of sets) {
    rows.push([
      name,
      String(t.outputs),
      String(t.rawTok),
      String(t.viewTok),
      pct(t.rawTok - t.viewTok, t.rawTok),
      `${t.diagKept}/${t.diag} (${pct(t.diagKept, t.diag)})`,
      `${t.pathDiagKept}/${t.pathDiag}`,
      `${t.groundKept}/${t.ground} (${pct(t.groundKept, t.ground)})`,
    ]);
  }
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  for (const r of rows)
    console.log(r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  '));
  console.log(
    `\n(default config, mode balanced; first view = the tool-result stream's output; o200k_base tokens; sessions: ${path})`,
  );
}
