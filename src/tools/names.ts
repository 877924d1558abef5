/**
 * Canonical tool names. Hosts name their tools differently (`bash`, `shell`, `run_terminal_cmd`,
 * `grep`, `read`); the operators work on four canonical names and a configurable map translates.
 */
import { ConfigError } from '../errors.js';

export type CanonicalTool = 'terminal' | 'search_files' | 'process' | 'read_file';

export const CANONICAL_TOOLS: readonly CanonicalTool[] = ['terminal', 'search_files', 'process', 'read_file'];

/** Names recognised without configuration (a user map adds to and overrides these). */
export const DEFAULT_TOOL_NAMES: Readonly<Record<string, CanonicalTool>> = Object.freeze({
  terminal: 'terminal',
  bash: 'terminal',
  shell: 'terminal',
  run_terminal_cmd: 'terminal',
  run_shell_command: 'terminal',
  execute_command: 'terminal',
  search_files: 'search_files',
  process: 'process',
  read_file: 'read_file',
});

/** Host name → canonical name, or undefined for tools the reduction paths ignore. */
export function canonicalToolName(name: string, map: Readonly<Record<string, string>> = {}): CanonicalTool | undefined {
  const found =
    map[name] ?? map[name.toLowerCase()] ?? DEFAULT_TOOL_NAMES[name] ?? DEFAULT_TOOL_NAMES[name.toLowerCase()];
  return found !== undefined && (CANONICAL_TOOLS as readonly string[]).includes(found)
    ? (found as CanonicalTool)
    : undefined;
}

/** Validate a user map at build time; the error names the operator. */
export function validateToolNames(operator: string, map: unknown): Readonly<Record<string, CanonicalTool>> {
  if (map === undefined) return {};
  if (typeof map !== 'object' || map === null || Array.isArray(map))
    throw new ConfigError(`${operator}: options.toolNames must be an object of host name → canonical name`);
  const out: Record<string, CanonicalTool> = {};
  for (const [host, canonical] of Object.entries(map)) {
    if (!(CANONICAL_TOOLS as readonly unknown[]).includes(canonical)) {
      throw new ConfigError(`${operator}: options.toolNames["${host}"] must be one of ${CANONICAL_TOOLS.join(', ')}`);
    }
    out[host] = canonical as CanonicalTool;
  }
  return Object.freeze(out);
}
