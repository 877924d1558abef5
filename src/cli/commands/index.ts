import type { Command } from 'commander';

/**
 * Adds one command (and its subcommands) to the program. Each command is one file exporting its
 * registrar; the program loads it lazily (LOADERS in ../program.ts, help order).
 */
export type CommandRegistrar = (program: Command) => void;
