import type { Command } from 'commander';
import { registerArtifact } from './artifact.js';
import { registerStatus } from './status.js';
import { registerReplay } from './replay.js';
import { registerStats } from './stats.js';
import { registerCompare } from './compare.js';
import { registerBench } from './bench.js';
import { registerReport } from './report.js';
import { registerEval } from './eval.js';
import { registerProxy } from './proxy.js';
import { registerVault } from './vault.js';

/** Adds one command (and its subcommands) to the program. */
export type CommandRegistrar = (program: Command) => void;

/** Every command of `token-terminator`, in help order. Add a command: one file, one line here. */
export const commands: CommandRegistrar[] = [
  registerStatus,
  registerArtifact,
  registerReplay,
  registerStats,
  registerCompare,
  registerBench,
  registerReport,
  registerEval,
  registerProxy,
  registerVault,
];
