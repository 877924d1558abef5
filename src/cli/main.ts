#!/usr/bin/env node
/** Entry point of the `token-terminator` command (see program.ts). */
import { run } from './program.js';

process.exitCode = await run(process.argv.slice(2));
