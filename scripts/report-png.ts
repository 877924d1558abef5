/**
 * docs/report.png from `npm start`'s own run, so the README's picture and its figures match: runs
 * the command `npm start` runs (`replay examples/sessions/sample.jsonl`, a fresh vault in a temp
 * dir) with `--json --series`, renders the report page from those figures, screenshots it in a
 * headless Chromium (Debian's `chromium`, or TOKEN_TERMINATOR_CHROMIUM) and prints the summary
 * line `npm start` ends with, to paste beside the picture.
 *
 * Usage: npm run report:png [-- --out docs/report.png]
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { parseReportInput, renderReport } from '../src/report/index.js';
import { summaryLine, type ReplayFigures } from '../src/replay/index.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const out = resolve(root, args.includes('--out') ? args[args.indexOf('--out') + 1]! : 'docs/report.png');
const executable = process.env['TOKEN_TERMINATOR_CHROMIUM'] || '/usr/bin/chromium';

// The package.json `start` script, with the two flags that make it print the report's input.
const start = (
  JSON.parse(execFileSync('npm', ['pkg', 'get', 'scripts.start'], { cwd: root, encoding: 'utf8' })) as string
)
  .replace(/^tsx /, '')
  .split(' ');
const json = execFileSync(process.execPath, ['--import', 'tsx', ...start, '--json', '--series'], {
  cwd: root,
  encoding: 'utf8',
  maxBuffer: 256 << 20,
  env: { ...process.env, NO_COLOR: '1' },
});
const figures = JSON.parse(json) as ReplayFigures;
const html = renderReport(parseReportInput(JSON.parse(json) as unknown), {
  source: 'npm start: a replay of examples/sessions/sample.jsonl',
});

const dir = mkdtempSync(join(tmpdir(), 'tt-report-png-'));
try {
  writeFileSync(join(dir, 'report.html'), html);
  const browser = await chromium.launch({ executablePath: executable, args: ['--no-sandbox', '--disable-gpu'] });
  try {
    const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
    await page.goto(pathToFileURL(join(dir, 'report.html')).href);
    await page.screenshot({ path: out, fullPage: true });
  } finally {
    await browser.close();
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(`${out}: the report of npm start's run`);
console.log(summaryLine(figures));
