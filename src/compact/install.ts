/**
 * Package-manager installs (npm, pnpm, yarn, pip, uv, cargo fetch, bundler): fetch/progress/timing
 * chatter dropped and counted; warnings, errors and the final summary kept.
 */
import { selectLines } from './compact-text.js';
import { factorRuns } from './factor.js';
import { renderFaithful } from './faithful.js';
import { clipLine, splitLines, stripAnsi } from './lines.js';
import type { FailureView } from './test-runners.js';

const NOISE: readonly RegExp[] = [
  /^npm (http|timing|verb|verbose|info|sill|silly|notice)\b/,
  /^(pnpm|yarn) (info|verbose)\b/,
  /^Progress: resolved \d+/,
  /^\s*(Collecting|Downloading|Using cached|Obtaining|Requirement already satisfied|Looking in indexes|Preparing metadata|Getting requirements|Building wheels? for|Created wheel|Stored in directory)\b/,
  /^\s*(Downloaded|Downloading|Updating|Locking|Adding|Fetching|Resolving|Resolved|Prepared|Audited|Installed|Uninstalled) \S+ (v?[\d.]+|packages?)\b/,
  /^\s*[━█░▓▒ \d.%/kMGB|:]+$/u,
  /^Fetching gem metadata|^Using \S+ [\d.]+$/,
];

const SUMMARY =
  /^(added|removed|changed|up to date|audited|found \d+|\d+ packages? are looking for funding|Successfully installed|Installed \d+|Done in|Packages:|dependencies:|devDependencies:)/i;

/** Drop install chatter; undefined when nothing is chatter (not an install log). With `failure`, its diagnostic lines stay verbatim. */
export function compactInstall(text: string, maxChars = 8000, failure?: FailureView): string | undefined {
  const lines = splitLines(stripAnsi(text));
  const flagged = new Set(failure?.flagged);
  const kept: string[] = [];
  const keptFlagged: number[] = [];
  let dropped = 0;
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i]!;
    if (flagged.has(i)) {
      keptFlagged.push(kept.length);
      kept.push(line);
    } else if (NOISE.some((re) => re.test(line))) dropped += 1;
    else kept.push(clipLine(line, 500));
  }
  if (dropped === 0) return undefined;
  const keep = (l: string): boolean => SUMMARY.test(l);
  const body =
    failure === undefined
      ? selectLines(factorRuns(kept), maxChars, keep)
      : renderFaithful(kept, keptFlagged, { maxChars, diagnosticChars: failure.diagnosticChars, keep });
  return `[install: ${dropped} fetch/progress lines dropped]${body === '' ? '' : `\n${body}`}`;
}
