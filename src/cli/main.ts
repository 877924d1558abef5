#!/usr/bin/env node
/** Entry point of the `token-terminator` command (see program.ts). */
import { followLauncher } from './launcher.js';
import { run } from './program.js';

// Under npx, a SIGTERM to npm's pid must stop this process too (its workers with it).
followLauncher();
process.exitCode = await run(process.argv.slice(2));
