/** Reading a terminal tool call's arguments: command, working directory, backend. */
import { homedir } from 'node:os';
import { resolve } from 'node:path';

/**
 * The command string of a terminal call, or undefined when absent or blank: `command` or `cmd` (Codex
 * CLI's `exec_command`), a string or an argv array (Codex CLI's `shell`: `["bash", "-lc", "make"]`
 * gives the script, any other argv its words joined by spaces).
 */
export function commandOf(args: Readonly<Record<string, unknown>>): string | undefined {
  const command = args['command'] ?? args['cmd'];
  if (Array.isArray(command)) return argvCommand(command);
  return typeof command === 'string' && command.trim() !== '' ? command : undefined;
}

function argvCommand(argv: readonly unknown[]): string | undefined {
  if (argv.length === 0 || !argv.every((a) => typeof a === 'string')) return undefined;
  const words = argv as readonly string[];
  const shell = /(?:^|\/)(?:ba|z|da|k)?sh$/.test(words[0]!);
  const script = shell && words.length === 3 && /^-l?c$|^-cl$/.test(words[1]!) ? words[2]! : words.join(' ');
  return script.trim() === '' ? undefined : script;
}

/** `args.cwd` / `args.workdir` (with `~` expanded, resolved against the fallback), else the fallback. */
export function cwdOf(args: Readonly<Record<string, unknown>>, fallback: string): string {
  const raw = args['cwd'] ?? args['workdir'];
  if (typeof raw !== 'string' || raw.trim() === '') return resolve(fallback);
  const expanded = raw.startsWith('~') ? homedir() + raw.slice(1) : raw;
  return resolve(fallback, expanded);
}

/** `args.env_type` / `args.backend`, else TERMINAL_ENV / TERMINAL_BACKEND, else `local` (lower-cased). */
export function backendOf(
  args: Readonly<Record<string, unknown>>,
  env: Readonly<Record<string, string | undefined>>,
): string {
  for (const value of [args['env_type'], args['backend'], env['TERMINAL_ENV'], env['TERMINAL_BACKEND']]) {
    if (typeof value === 'string' && value.trim() !== '') return value.trim().toLowerCase();
  }
  return 'local';
}

/** Allowed iff the list contains `all` or the backend. */
export function backendAllowed(backend: string, allowed: readonly string[]): boolean {
  return allowed.includes('all') || allowed.includes(backend);
}

/** Whitespace-normalised command (temporal scope key): trimmed, blank runs outside quotes collapsed. */
export function normalizeCommand(command: string): string {
  let out = '';
  let quote: string | undefined;
  for (const ch of command.trim()) {
    if (quote === undefined && (ch === '"' || ch === "'")) quote = ch;
    else if (ch === quote) quote = undefined;
    if (quote === undefined && (ch === ' ' || ch === '\t') && out.endsWith(' ')) continue;
    out += quote === undefined && ch === '\t' ? ' ' : ch;
  }
  return out;
}
