#!/usr/bin/env node
// Launcher: the compiled CLI when the package is built, else the TypeScript source through tsx,
// so the command also works from a fresh clone after `npm install`, without a build.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const built = new URL('../dist/src/cli/main.js', import.meta.url);
if (existsSync(fileURLToPath(built))) {
  await import(built.href);
} else {
  let tsImport;
  try {
    ({ tsImport } = await import('tsx/esm/api'));
  } catch {
    process.stderr.write(
      'token-terminator: no build found (dist/) and tsx is not installed; run `npm run build` first\n',
    );
    process.exit(1);
  }
  await tsImport('../src/cli/main.ts', import.meta.url);
}
