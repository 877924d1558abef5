import type { Command } from 'commander';
import type { RecoveryToolHandle } from '../../recovery/index.js';
import {
  integerAtLeast,
  recover,
  withCommonOptions,
  withRecovery,
  writeJson,
  writeOut,
  type CommonOptions,
} from '../context.js';

interface GetOptions extends CommonOptions {
  offset?: number;
  limit?: number;
}

/**
 * Exact content from `offset`: the whole rest of the artifact, or at most `limit` code points.
 * Pages are written as they arrive, byte for byte, with nothing added.
 */
async function writeExact(
  tool: RecoveryToolHandle,
  id: string,
  offset: number,
  limit: number | undefined,
  pageChars: number,
): Promise<void> {
  let next: number | null = offset;
  let left = limit ?? Number.POSITIVE_INFINITY;
  while (next !== null && left > 0) {
    const page = await recover(tool, {
      action: 'artifact_get',
      artifact_id: id,
      offset: next,
      limit: Math.min(left, pageChars),
    });
    const content = page['content'] as string;
    await writeOut(content);
    left -= page['next_offset'] === null ? left : (page['next_offset'] as number) - next;
    next = page['next_offset'] as number | null;
  }
}

async function get(id: string, options: GetOptions): Promise<void> {
  await withRecovery(options, async (tool, config) => {
    if (options.json) {
      const args = { action: 'artifact_get', artifact_id: id, offset: options.offset ?? 0 };
      return writeJson(await recover(tool, options.limit === undefined ? args : { ...args, limit: options.limit }));
    }
    return writeExact(tool, id, options.offset ?? 0, options.limit, config.maxPageChars);
  });
}

async function peek(id: string, options: CommonOptions): Promise<void> {
  await withRecovery(options, async (tool) => {
    const p = await recover(tool, { action: 'artifact_peek', artifact_id: id });
    if (options.json) return writeJson(p);
    const synopsis = p['synopsis'] as { head: string[]; tail: string[]; signals: string[] };
    const section = (title: string, lines: string[]): string[] =>
      lines.length ? [`${title}:`, ...lines.map((l) => `  ${l}`)] : [];
    const out = [
      `${String(p['artifact_id'])}  tool=${String(p['tool_name'])}  chars=${String(p['total_chars'])}  bytes=${String(p['total_bytes'])}  ` +
        `lines=${String(p['line_count'])}  observed=${String(p['observation_count'])}  created=${String(p['created_at'])}`,
      `structure: ${JSON.stringify(p['structure'])}`,
      ...section('head', synopsis.head),
      ...section('signals', synopsis.signals),
      ...section('tail', synopsis.tail),
      `(lossy view; exact content: token-terminator artifact get ${String(p['artifact_id'])})`,
    ];
    await writeOut(`${out.join('\n')}\n`);
  });
}

async function find(id: string, pattern: string, options: CommonOptions & { limit?: number }): Promise<void> {
  await withRecovery(options, async (tool) => {
    const args = { action: 'artifact_find', artifact_id: id, query: pattern };
    const f = await recover(tool, options.limit === undefined ? args : { ...args, limit: options.limit });
    if (options.json) return writeJson(f);
    const matches = f['matches'] as { line: number; text: string }[];
    await writeOut(matches.map((m) => `${m.line}:${m.text}\n`).join(''));
    if (f['truncated'] === true)
      process.stderr.write(`(${matches.length} of ${String(f['total_matches'])} matches shown)\n`);
  });
}

async function search(query: string, options: CommonOptions & { limit?: number }): Promise<void> {
  await withRecovery(options, async (tool) => {
    const s = await recover(tool, { action: 'artifact_search', query, limit: options.limit ?? 10 });
    if (options.json) return writeJson(s);
    const rows = s['results'] as { artifact_id: string; chars: number; tool_name: string; created_at: string }[];
    await writeOut(rows.map((r) => `${r.artifact_id}\t${r.chars} chars\t${r.tool_name}\t${r.created_at}\n`).join(''));
    if (rows.length === 0) process.stderr.write('no artifacts match\n');
  });
}

/** `token-terminator artifact get|peek|find|search`. */
export function registerArtifact(program: Command): void {
  const artifact = program.command('artifact').description('read artifacts from the vault');
  withCommonOptions(
    artifact
      .command('get <id>')
      .description('write the exact content to stdout (the whole artifact unless --limit)')
      .option('--offset <n>', 'start at this code-point offset', integerAtLeast(0))
      .option(
        '--limit <n>',
        'at most this many code points (with --json: one page of this size, default 8000)',
        integerAtLeast(1),
      ),
  ).action(get);
  withCommonOptions(
    artifact.command('peek <id>').description('lossy synopsis: size, head/tail, signal lines, JSON shape'),
  ).action(peek);
  withCommonOptions(
    artifact
      .command('find <id> <pattern>')
      .description('lines of one artifact containing pattern (case-insensitive)')
      .option('--limit <n>', 'most matches (≤ 100)', integerAtLeast(1)),
  ).action(find);
  withCommonOptions(
    artifact
      .command('search <query>')
      .description('artifacts whose content or tool name matches query')
      .option('--limit <n>', 'most results (default 10)', integerAtLeast(1)),
  ).action(search);
}
