/** Reading a terminal tool call's arguments: command, working directory, backend. */
import { homedir } from 'node:os';
import { resolve } from 'node:path';

/** The command string of a terminal call, or undefined when absent or blank. */
export function commandOf(args: Readonly<Record<string, unknown>>): string | undefined {
  const command = args['command'] ?? args['cmd'];
  return typeof command === 'string' && command.trim() !== '' ? command : undefined;
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
