/**
 * How long a vitest run will take, printed at its start: the committed per-file durations
 * (test/support/durations.json: seconds per file, its imports included, from one whole run on a
 * 2-core machine that was busy with other work too, so an idle machine does better) spread over
 * the workers (vitest's default: one less than the cores, at least one), longest file first. A
 * file not in the table counts as the table's median. Refresh the table from a JSON report of a
 * whole run:
 *
 *   npx vitest run --reporter=json --outputFile.json=report.json   # (and the reliability config)
 *   node --import tsx test/support/estimate.ts update report.json [more reports…]
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TABLE = fileURLToPath(new URL('./durations.json', import.meta.url));

function readTable(): Record<string, number> {
  return existsSync(TABLE) ? (JSON.parse(readFileSync(TABLE, 'utf8')) as Record<string, number>) : {};
}

/** Seconds the files will take in all, and with `workers` running them side by side. */
export function estimate(files: readonly string[], workers: number): { total: number; wall: number } {
  const table = readTable();
  const known = Object.values(table).sort((a, b) => a - b);
  const median = known[Math.floor(known.length / 2)] ?? 5;
  const times = files.map((f) => table[relative(ROOT, resolve(ROOT, f)).split('\\').join('/')] ?? median);
  const total = times.reduce((a, b) => a + b, 0);
  // Longest-first onto the least loaded worker: what a pool of `workers` does with whole files.
  const lanes = new Array<number>(Math.max(1, workers)).fill(0);
  for (const t of [...times].sort((a, b) => b - a)) {
    const i = lanes.indexOf(Math.min(...lanes));
    lanes[i]! += t;
  }
  return { total, wall: Math.max(...lanes) };
}

const minutes = (s: number): string => (s < 90 ? `${Math.round(s)} s` : `${(s / 60).toFixed(1)} min`);

/** The workers `vitest run` uses when maxWorkers is not set. */
export const defaultWorkers = (): number => Math.max(availableParallelism() - 1, 1);

/** The line printed at the start of a run. */
export function estimateLine(label: string, files: readonly string[], workers = defaultWorkers()): string {
  const { wall } = estimate(files, workers);
  const count = `${files.length} test file${files.length === 1 ? '' : 's'}`;
  return `${label}: ${count}, about ${minutes(wall)} with ${workers} worker${workers === 1 ? '' : 's'} (per-file times in test/support/durations.json)`;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [action, ...reports] = process.argv.slice(2);
  if (action !== 'update' || reports.length === 0) {
    process.stderr.write('usage: estimate.ts update <vitest-json-report>…\n');
    process.exit(2);
  }
  const table = readTable();
  for (const report of reports) {
    const r = JSON.parse(readFileSync(report, 'utf8')) as {
      startTime: number;
      testResults: { name: string; startTime: number; endTime: number }[];
    };
    // A file's start and end span its tests only; the time it took to import comes before its
    // start: count from the end of the file that finished last before it (or the run's start).
    const ends = r.testResults.map((f) => f.endTime).sort((a, b) => a - b);
    for (const f of r.testResults) {
      const before = ends.filter((e) => e <= f.startTime).at(-1) ?? r.startTime;
      table[relative(ROOT, f.name).split('\\').join('/')] = Math.round((f.endTime - before) / 100) / 10;
    }
  }
  const sorted = Object.fromEntries(Object.entries(table).sort(([a], [b]) => a.localeCompare(b)));
  writeFileSync(TABLE, `${JSON.stringify(sorted, null, 2)}\n`);
  process.stdout.write(`${Object.keys(sorted).length} files in ${TABLE}\n`);
}
