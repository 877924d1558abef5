/**
 * Canonical tool names. Hosts name their tools differently (`bash`, `shell`, `run_terminal_cmd`,
 * `grep`, `read`); the operators work on four canonical names and a configurable map translates.
 */
import { CANONICAL_TOOLS } from '../config/index.js';
import { ConfigError } from '../errors.js';

/**
 * Host tool names renamed before a tool result is reduced when the configured `toolNames` do not name
 * them: recorded sessions (replay) and the proxy's and custom loop's first-seen outputs name a `bash`
 * tool's output `terminal`.
 *
 * @example
 * REPLAY_TOOL_NAMES['bash']; // 'terminal'
 */
export const REPLAY_TOOL_NAMES: Readonly<Record<string, string>> = Object.freeze({ bash: 'terminal' });

type CanonicalTool = (typeof CANONICAL_TOOLS)[number];

/**
 * Names recognised without configuration (a user map adds to and overrides these), also lower-cased
 * (Claude Code's `Bash`, `Read`, `Grep`, `Glob`): the tools of Claude Code, Codex CLI (`exec_command`,
 * `shell`, `local_shell`, `apply_patch`, `write_stdin`), opencode, OpenHands, SWE-agent,
 * mini-swe-agent, Gemini CLI, Cursor and Cline. `str_replace_editor`'s `view` prints a file.
 */
export const DEFAULT_TOOL_NAMES: Readonly<Record<string, CanonicalTool>> = Object.freeze({
  terminal: 'terminal',
  bash: 'terminal',
  shell: 'terminal',
  local_shell: 'terminal',
  exec_command: 'terminal',
  apply_patch: 'terminal',
  write_stdin: 'terminal',
  TaskOutput: 'terminal',
  execute_bash: 'terminal',
  run_terminal_cmd: 'terminal',
  run_shell_command: 'terminal',
  execute_command: 'terminal',
  search_files: 'search_files',
  grep: 'search_files',
  glob: 'search_files',
  find_file: 'search_files',
  search_dir: 'search_files',
  search_file: 'search_files',
  search_file_content: 'search_files',
  process: 'process',
  read_file: 'read_file',
  read: 'read_file',
  str_replace_editor: 'read_file',
});

/** Host name → canonical name, or undefined for tools the reduction paths ignore. */
export function canonicalToolName(name: string, map: Readonly<Record<string, string>> = {}): CanonicalTool | undefined {
  const found =
    map[name] ?? map[name.toLowerCase()] ?? DEFAULT_TOOL_NAMES[name] ?? DEFAULT_TOOL_NAMES[name.toLowerCase()];
  return (CANONICAL_TOOLS as readonly (string | undefined)[]).includes(found) ? (found as CanonicalTool) : undefined;
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
