/**
 * The pytest double-quiet guard: RTK's pytest wrapper adds `-q`, which
 * mis-reports when the project's own config already sets a quiet flag, so such commands are not
 * rewritten. The config lookup walks up from the working directory and is cached per directory.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

const PYTEST_COMMAND = /(?:^|&&|\|\||;)\s*(?:uv run\s+)?(?:python(?:3(?:\.\d+)?)?\s+-m\s+)?pytest(?:\s|$)/;
/** addopts holding `-q`, `-qq…` or `--quiet` as a whole token. */
const QUIET = /(?:^|\s)(?:-q+|--quiet)(?=\s|$)/;
const MAX_DIRS = 8;

/** True for `pytest`, `python -m pytest`, `python3.12 -m pytest`, `uv run pytest`, also after `&&`, `||`, `;`. */
export function isPytestCommand(command: string): boolean {
  return PYTEST_COMMAND.test(command);
}

/** Reads a file as text, or undefined when it cannot be read. */
export type ReadTextFile = (path: string) => string | undefined;

export const readTextFileSync: ReadTextFile = (path) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
};

/** addopts of pyproject's `[tool.pytest.ini_options]` (string, or list joined by spaces). */
export function pyprojectAddopts(text: string): string | undefined {
  const section = sectionBody(text, 'tool.pytest.ini_options');
  if (section === undefined) return undefined;
  const m = /^\s*addopts\s*=\s*(.*)$/m.exec(section);
  if (m === null) return '';
  const rest = section.slice(m.index + m[0].length - m[1]!.length);
  const value = rest.trimStart();
  if (value.startsWith('[')) {
    const end = value.indexOf(']');
    const body = end < 0 ? value : value.slice(1, end);
    return [...body.matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'/g)].map((x) => x[1] ?? x[2] ?? '').join(' ');
  }
  const str = /^(?:"((?:[^"\\]|\\.)*)"|'([^']*)')/.exec(value);
  return str === null ? m[1]!.trim() : (str[1] ?? str[2] ?? '');
}

/** addopts of an ini file's section (`[pytest]` or `[tool:pytest]`), continuation lines included. */
export function iniAddopts(text: string, name: string): string | undefined {
  const section = sectionBody(text, name);
  if (section === undefined) return undefined;
  const lines = section.split(/\r?\n/);
  const at = lines.findIndex((l) => /^addopts\s*[=:]/.test(l));
  if (at < 0) return '';
  const parts = [lines[at]!.replace(/^addopts\s*[=:]\s*/, '')];
  for (const l of lines.slice(at + 1)) {
    if (!/^\s+\S/.test(l)) break;
    parts.push(l.trim());
  }
  return parts.join(' ');
}

function sectionBody(text: string, name: string): string | undefined {
  const lines = text.split(/\r?\n/);
  const start = lines.findIndex((l) => l.trim() === `[${name}]`);
  if (start < 0) return undefined;
  const end = lines.findIndex((l, i) => i > start && /^\s*\[[^\]]+\]\s*$/.test(l));
  return lines.slice(start + 1, end < 0 ? undefined : end).join('\n');
}

/**
 * A per-directory cached probe: does the pytest config governing `dir` set a quiet flag? The
 * first config file with a pytest section wins (as pytest picks its rootdir config); the walk
 * stops at a directory containing `.git` or after 8 directories. Parse errors count as not quiet.
 */
export function createPytestQuietProbe(
  read: ReadTextFile = readTextFileSync,
  exists: (path: string) => boolean = existsSync,
): (dir: string) => boolean {
  const cache = new Map<string, boolean>();
  return (start) => {
    const cached = cache.get(start);
    if (cached !== undefined) return cached;
    let result = false;
    let dir = start;
    for (let n = 0; n < MAX_DIRS; n += 1) {
      const found = configAddopts(dir, read);
      if (found !== undefined) {
        result = QUIET.test(found);
        break;
      }
      if (exists(join(dir, '.git')) || dirname(dir) === dir) break;
      dir = dirname(dir);
    }
    cache.set(start, result);
    return result;
  };
}

function configAddopts(dir: string, read: ReadTextFile): string | undefined {
  try {
    const pyproject = read(join(dir, 'pyproject.toml'));
    const fromPyproject = pyproject === undefined ? undefined : pyprojectAddopts(pyproject);
    if (fromPyproject !== undefined) return fromPyproject;
    for (const [file, section] of [
      ['pytest.ini', 'pytest'],
      ['tox.ini', 'pytest'],
      ['setup.cfg', 'tool:pytest'],
    ] as const) {
      const text = read(join(dir, file));
      const found = text === undefined ? undefined : iniAddopts(text, section);
      if (found !== undefined) return found;
    }
  } catch {
    return undefined;
  }
  return undefined;
}
