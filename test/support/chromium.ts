/**
 * Debian's Chromium for the browser checks, driven by playwright-core through its executable path
 * (never a downloaded build). Without one: in CI (CI set) the checks fail, because .ci/run installs
 * chromium and a missing browser there is a broken pipeline; on a developer's clone they are
 * skipped, visibly, with how to enable them. A browser that is found but cannot start always fails.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

// An explicit TOKEN_TERMINATOR_CHROMIUM is the only candidate: a wrong path must not fall back silently.
const configured = process.env['TOKEN_TERMINATOR_CHROMIUM'];
const CANDIDATES =
  configured !== undefined && configured !== '' ? [configured] : ['/usr/bin/chromium', '/usr/bin/chromium-browser'];

export const chromiumExecutable: string | undefined = CANDIDATES.find((p) => existsSync(p));
export const inCI = process.env['CI'] !== undefined && process.env['CI'] !== '' && process.env['CI'] !== 'false';
export const MISSING_CHROMIUM = `no Chromium found (looked at ${CANDIDATES.join(', ')}): install Debian\u2019s chromium (apt-get install -y chromium) or set TOKEN_TERMINATOR_CHROMIUM to its path`;
/** Skip the whole block only off CI and without a browser. */
export const skipBrowser = chromiumExecutable === undefined && !inCI;

/** Start the browser (fails with MISSING_CHROMIUM in CI when there is none). */
export function launchChromium(): Promise<Browser> {
  if (chromiumExecutable === undefined) throw new Error(MISSING_CHROMIUM);
  return chromium.launch({
    executablePath: chromiumExecutable,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
