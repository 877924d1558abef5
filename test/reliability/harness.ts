/**
 * The reliability harness: drive a recorded session through the assembled pipeline
 * (`createTerminator` facades, as a host would), check every output (never a throw, identical or
 * a valid smaller value, every receipt recovers exactly through the recovery tool) and summarise
 * the decisions for the fault matrix.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, statSync, writeSync } from 'node:fs';
import Database from 'better-sqlite3';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { serializedChars, codePoints } from '../../src/measure/index.js';
import { readRequest } from '../../src/model/index.js';
import { referencedArtifacts } from '../../src/receipts/index.js';
import type { RecoveryTool, Terminator } from '../../src/runtime/index.js';
import type { Decision, ProviderRequest, Route, Step, ToolCall, ToolResult } from '../../src/step.js';
import { roleProblems } from '../../src/testing/format.js';
import { artifactIdFor } from '../../src/vault/index.js';
import type { Workload } from '../fixtures/reliability/workload.js';

export const repoRoot = resolve(fileURLToPath(new URL('../..', import.meta.url)));
export const CLI = join(repoRoot, 'bin', 'token-terminator.js');
export const RTK_STUB = join(repoRoot, 'test', 'fixtures', 'rtk', 'rtk');
export const fixture = (name: string): string => join(repoRoot, 'test', 'fixtures', 'reliability', name);

/**
 * Damage a vault file under an open connection, as another process would: write and checkpoint
 * through a second connection (the open connection's page cache is then stale), then overwrite
 * every page after the header.
 */
export function corruptUnderOpenVault(path: string): void {
  const other = new Database(path);
  other.prepare('UPDATE vault_meta SET value = value WHERE key = (SELECT key FROM vault_meta LIMIT 1)').run();
  other.pragma('wal_checkpoint(TRUNCATE)');
  other.close();
  const size = statSync(path).size;
  const fd = openSync(path, 'r+');
  writeSync(fd, Buffer.alloc(size - 4096, 0x5a), 0, size - 4096, 4096);
  closeSync(fd);
}

/** A fresh temp directory and its cleanup. */
export function tempDir(prefix: string): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export type ItemKind = 'tool_call' | 'tool_result' | 'request';

/** One facade call of the workload: its input and what came back (or what it threw). */
export interface ItemResult {
  readonly kind: ItemKind;
  readonly input: ToolCall | ToolResult | ProviderRequest;
  readonly output?: Step<unknown>;
  readonly threw?: unknown;
}

export interface RunOptions {
  /** Route of every request. Default: the workload's model with a 128k window. */
  readonly route?: Route;
  /** Send terminal tool calls through `reduceToolCall`. Default true. */
  readonly toolCalls?: boolean;
}

/**
 * Walk the session like a host: tool calls through the tool-call stream, tool results through the
 * tool-result stream (the reduced result is what the transcript keeps), and at each assistant
 * message the request built from the reduced transcript through the request stream.
 */
export async function runWorkload(tt: Terminator, w: Workload, options: RunOptions = {}): Promise<ItemResult[]> {
  const route = options.route ?? { model: w.model, contextWindow: 128_000 };
  const results: ItemResult[] = [];
  const reduced: Readonly<Record<string, unknown>>[] = [];
  const calls = new Map<string, { name: string; args: Record<string, unknown> }>();
  let index = 0;
  const call = async (
    kind: ItemKind,
    input: ItemResult['input'],
    run: () => Promise<Step<unknown>>,
  ): Promise<Step<unknown> | undefined> => {
    try {
      const output = await run();
      results.push({ kind, input, output });
      return output;
    } catch (threw) {
      results.push({ kind, input, threw });
      return undefined;
    }
  };
  for (let i = 0; i < w.messages.length; i++) {
    const msg = w.messages[i]!;
    if (msg['role'] === 'assistant' && i > 0) {
      const request: ProviderRequest = { model: w.model, messages: reduced.slice(), tools: w.tools };
      await call('request', request, () =>
        tt.reduceRequest(request, { sessionId: w.id, requestId: `${w.id}#${index++}`, route }),
      );
    }
    if (msg['role'] === 'assistant') {
      for (const c of (msg['tool_calls'] as
        { id: string; function: { name: string; arguments: string } }[] | undefined) ?? []) {
        const args = JSON.parse(c.function.arguments) as Record<string, unknown>;
        calls.set(c.id, { name: c.function.name, args });
        if (options.toolCalls !== false && c.function.name === 'terminal') {
          const tc: ToolCall = { id: c.id, name: c.function.name, args };
          await call('tool_call', tc, () => tt.reduceToolCall(tc, { sessionId: w.id }));
        }
      }
    }
    if (msg['role'] === 'tool') {
      const id = String(msg['tool_call_id']);
      const c = calls.get(id) ?? { name: 'tool', args: {} };
      const result: ToolResult = { callId: id, name: c.name, args: c.args, content: String(msg['content']) };
      const out = await call('tool_result', result, () => tt.reduceToolResult(result, { sessionId: w.id }));
      const content = (out?.value as ToolResult | undefined)?.content;
      reduced.push(typeof content === 'string' && content !== result.content ? { ...msg, content } : msg);
      continue;
    }
    reduced.push(msg);
  }
  return results;
}

const CAP_FIELDS = ['max_tokens', 'max_completion_tokens', 'max_output_tokens'];

/** A request without its output-cap fields (the budget cap adds one; everything else must shrink or stay). */
export function withoutCaps(request: ProviderRequest): ProviderRequest {
  return Object.fromEntries(Object.entries(request).filter(([k]) => !CAP_FIELDS.includes(k)));
}

/** Every string inside a value. */
export function strings(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) for (const v of value) strings(v, out);
  else if (value !== null && typeof value === 'object') for (const v of Object.values(value)) strings(v, out);
  return out;
}

/** Artifact ids named by Token Terminator markers anywhere in a value. */
export function receiptIds(value: unknown): string[] {
  const ids = new Set<string>();
  for (const s of strings(value)) for (const id of referencedArtifacts(s)) ids.add(id);
  return [...ids];
}

/**
 * Recover an artifact completely through the recovery tool (artifact_get pages until next_offset
 * is null). Returns the content, or an error label.
 */
export async function recoverViaTool(
  tool: RecoveryTool,
  sessionId: string,
  id: string,
): Promise<{ content?: string; error?: string }> {
  const parts: string[] = [];
  let offset = 0;
  for (let guard = 0; guard < 10_000; guard++) {
    const r = JSON.parse(
      await tool.handle({ action: 'artifact_get', artifact_id: id, offset, limit: 20_000 }, { sessionId }),
    ) as Record<string, unknown>;
    const err = r['error'] as { code?: string } | undefined;
    if (err !== undefined) return { error: err.code ?? 'error' };
    parts.push(String(r['content']));
    const next = r['next_offset'];
    if (next === null) return { content: parts.join('') };
    if (typeof next !== 'number' || next <= offset) return { error: 'bad next_offset' };
    offset = next;
  }
  return { error: 'too many pages' };
}

/** True when content hashes to the id (short or long form). */
export function idMatches(id: string, content: string): boolean {
  const short = artifactIdFor(content);
  return id === short || (id.length === 66 && id.startsWith(short));
}

export interface CheckReport {
  readonly problems: string[];
  /** Distinct artifact ids named by the outputs. */
  readonly receipts: string[];
  /** How many of them recovered exactly. */
  readonly recovered: number;
}

/**
 * The per-output guarantees: resolved (no throw), the output belongs to its input, the value is
 * identical or a valid smaller one (tool result: fewer code points and the exact original
 * vaulted; request: fewer serialized chars without cap fields — or larger only where a delta whose
 * base the request does not show was replaced by its output — and valid roles; tool call: an rtk
 * rewrite), and every receipt in any output recovers exactly through `recover`.
 */
export async function checkResults(
  results: readonly ItemResult[],
  recover: (id: string) => Promise<{ content?: string; error?: string }>,
): Promise<CheckReport> {
  const problems: string[] = [];
  const ids = new Set<string>();
  results.forEach((r, i) => {
    const where = `${r.kind} #${i}`;
    if (r.threw !== undefined || r.output === undefined) return void problems.push(`${where}: threw ${label(r.threw)}`);
    if (r.output.original !== r.input) problems.push(`${where}: output is not the Step of its input`);
    for (const id of receiptIds(r.output.value)) ids.add(id);
    const value = r.output.value;
    if (r.kind === 'tool_result') {
      const inp = r.input as ToolResult;
      const out = value as ToolResult;
      if (out.content === inp.content) return;
      if (!(codePoints(out.content) < codePoints(inp.content))) problems.push(`${where}: changed but not smaller`);
      if (!receiptIds(out.content).includes(artifactIdFor(inp.content)))
        problems.push(`${where}: reduced without naming the vaulted original`);
    } else if (r.kind === 'request') {
      const inp = r.input as ProviderRequest;
      const out = withoutCaps(value as ProviderRequest);
      if (JSON.stringify(out) === JSON.stringify(withoutCaps(inp))) return;
      if (!(serializedChars(out) < serializedChars(withoutCaps(inp))) && !expandsDanglingDeltas(inp, out))
        problems.push(`${where}: changed but not smaller`);
      const roles = roleProblems(out);
      if (roles.length > 0) problems.push(`${where}: invalid roles (${roles[0]})`);
    } else {
      const inp = r.input as ToolCall;
      const out = value as ToolCall;
      if (out.args['command'] === inp.args['command']) return;
      if (!String(out.args['command']).startsWith('rtk '))
        problems.push(`${where}: command changed into something other than an rtk rewrite`);
    }
  });
  let recovered = 0;
  for (const id of ids) {
    const got = await recover(id);
    if (got.content !== undefined && idMatches(id, got.content)) recovered++;
    else problems.push(`receipt ${id} does not recover (${got.error ?? 'content does not hash to the id'})`);
  }
  return { problems, receipts: [...ids], recovered };
}

/**
 * The one way a request may grow (the fidelity contract outranks the saving): a temporal delta
 * whose base output the request does not show is replaced by the output it stands for. Two hosts
 * replaying one session id at once get there: host B's first run of a command meets the baseline
 * host A stored and becomes a delta against an output B's conversation never showed. True when
 * every tool output that grew was such a delta.
 */
function expandsDanglingDeltas(input: ProviderRequest, output: ProviderRequest): boolean {
  const before = new Map(
    readRequest(input)
      .slots.filter((s) => s.kind === 'tool_output')
      .map((s) => [JSON.stringify(s.path), s.value]),
  );
  let expanded = 0;
  for (const slot of readRequest(output).slots) {
    if (slot.kind !== 'tool_output') continue;
    const was = before.get(JSON.stringify(slot.path));
    if (typeof was !== 'string' || typeof slot.value !== 'string' || slot.value.length <= was.length) continue;
    if (!was.startsWith('[Token Terminator temporal delta')) return false;
    expanded++;
  }
  return expanded > 0;
}

export function label(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' ? `${error.name}:${code}` : error.name;
  }
  return String(error);
}

/** All decisions of the outputs of one kind (or all kinds). */
export function decisionsOf(results: readonly ItemResult[], kind?: ItemKind): Decision[] {
  return results
    .filter((r) => kind === undefined || r.kind === kind)
    .flatMap((r) => (r.output?.decisions ?? []) as Decision[]);
}

/** `stage×n` for each stage with a decision of this kind, sorted. */
export function stagesWith(results: readonly ItemResult[], kind: Decision['kind']): string {
  const counts = new Map<string, number>();
  for (const d of decisionsOf(results)) if (d.kind === kind) counts.set(d.stage, (counts.get(d.stage) ?? 0) + 1);
  return [...counts]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([s, n]) => `${s}×${n}`)
    .join(', ');
}

/** Error labels seen in failed_open decisions. */
export function errorLabels(results: readonly ItemResult[]): string {
  return [
    ...new Set(
      decisionsOf(results)
        .filter((d) => d.kind === 'failed_open')
        .map((d) => d.error ?? '?'),
    ),
  ]
    .sort()
    .join(', ');
}

/** How many outputs equal their input (requests compared without cap fields). */
export function passedThrough(results: readonly ItemResult[]): number {
  return results.filter((r) => {
    const v = r.output?.value;
    if (v === undefined) return false;
    if (r.kind === 'request')
      return (
        JSON.stringify(withoutCaps(v as ProviderRequest)) === JSON.stringify(withoutCaps(r.input as ProviderRequest))
      );
    return JSON.stringify(v) === JSON.stringify(r.input);
  }).length;
}

// ---------------------------------------------------------------------------------------------
// The matrix printed by the fault-matrix test.

export interface MatrixRow {
  readonly cell: string;
  readonly injection: string;
  readonly outcome: string;
}

export function renderMatrix(title: string, rows: readonly MatrixRow[]): string {
  const head = ['cell', 'injection', 'outcome'];
  const lines = [`${title}`, `| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const r of rows) lines.push(`| ${r.cell} | ${r.injection} | ${r.outcome} |`);
  return lines.join('\n');
}

// ---------------------------------------------------------------------------------------------
// Environment probes and child processes.

/** True when this process may mount a tmpfs (root with CAP_SYS_ADMIN). */
export function canMount(dir: string): boolean {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir], { stdio: 'ignore' });
    execFileSync('umount', [dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** True when `chattr +i` works on this filesystem (CAP_LINUX_IMMUTABLE, ext4/xfs/btrfs). */
export function canChattr(dir: string): boolean {
  try {
    execFileSync('chattr', ['+i', dir], { stdio: 'ignore' });
    execFileSync('chattr', ['-i', dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Start a TypeScript fixture script under `node --import tsx`. */
export function startScript(
  script: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', fixture(script), ...args], {
    cwd: repoRoot,
    stdio: ['pipe', 'pipe', 'pipe'],
    env,
  });
}

/** Resolve with the first stdout line of a child (e.g. its `ready`). */
export function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    let buf = '';
    let err = '';
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (err += d));
    const onData = (d: string): void => {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl >= 0) {
        child.stdout?.off('data', onData);
        resolvePromise(buf.slice(0, nl));
      }
    };
    child.stdout?.setEncoding('utf8').on('data', onData);
    child.once('exit', (code) =>
      reject(new Error(`child exited (${String(code)}) before its first line: ${err.slice(0, 500)}`)),
    );
  });
}

export interface Finished {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Run a command to completion, collecting its output. */
export function runToEnd(
  file: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<Finished> {
  const child = spawn(file, [...args], { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  return new Promise((resolvePromise, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => resolvePromise({ code, signal, stdout, stderr }));
  });
}
