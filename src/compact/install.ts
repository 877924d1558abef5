/**
 * Package-manager installs (npm, pnpm, yarn, pip, uv, cargo fetch, bundler): fetch/progress/timing
 * chatter dropped and counted; warnings, errors and the final summary kept.
 */
import { selectLines } from './compact-text.js';
import { factorRuns } from './factor.js';
import { clipLine, splitLines, stripAnsi } from './lines.js';

const NOISE: readonly RegExp[] = [
  /^npm (http|timing|verb|verbose|info|sill|silly|notice)\b/,
  /^(pnpm|yarn) (info|verbose)\b/,
  /^Progress: resolved \d+/,
  /^\s*(Collecting|Downloading|Using cached|Obtaining|Requirement already satisfied|Looking in indexes|Preparing metadata|Getting requirements|Building wheels? for|Created wheel|Stored in directory)\b/,
  /^\s*(Downloaded|Downloading|Updating|Locking|Adding|Fetching|Resolving|Resolved|Prepared|Audited|Installed|Uninstalled) \S+ (v?[\d.]+|packages?)\b/,
  /^\s*[━█░▓▒ \d.%/kMGB|:]+$/u,
  /^Fetching gem metadata|^Using \S+ [\d.]+$/,
];

const SUMMARY = /^(added|removed|changed|up to date|audited|found \d+|\d+ packages? are looking for funding|Successfully installed|Installed \d+|Done in|Packages:|dependencies:|devDependencies:)/i;

/** Drop install chatter; undefined when nothing is chatter (not an install log). */
export function compactInstall(text: string, maxChars = 8000): string | undefined {
  const lines = splitLines(stripAnsi(text));
  const kept: string[] = [];
  let dropped = 0;
  for (const line of lines) {
    if (NOISE.some((re) => re.test(line))) dropped += 1;
    else kept.push(clipLine(line, 500));
  }
  if (dropped === 0) return undefined;
  const body = selectLines(factorRuns(kept), maxChars, (l) => SUMMARY.test(l));
  return `[install: ${dropped} fetch/progress lines dropped]${body === '' ? '' : `\n${body}`}`;
}
