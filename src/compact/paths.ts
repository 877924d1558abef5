/** Grouping of file paths by directory, shared by git status and listing renderings. */

/** Split a path into its directory (with trailing `/`, or `./`) and base name. */
export function splitPath(path: string): { dir: string; base: string } {
  const trimmed = path.endsWith('/') ? path.slice(0, -1) : path;
  const cut = trimmed.lastIndexOf('/');
  const suffix = path.endsWith('/') ? '/' : '';
  return cut < 0
    ? { dir: './', base: trimmed + suffix }
    : { dir: trimmed.slice(0, cut + 1), base: trimmed.slice(cut + 1) + suffix };
}

/** Paths grouped by directory, in first-seen order. */
export interface DirectoryGroups {
  readonly names: ReadonlyMap<string, readonly string[]>;
  /** The first path seen in each directory (a directory of one path prints that path). */
  readonly firstPath: ReadonlyMap<string, string>;
}

/** Group `paths` once, to render them with several caps ({@link renderGroups}). */
export function directoryGroups(paths: readonly string[]): DirectoryGroups {
  const names = new Map<string, string[]>();
  const firstPath = new Map<string, string>();
  for (const path of paths) {
    const { dir, base } = splitPath(path);
    const list = names.get(dir);
    if (list === undefined) {
      names.set(dir, [base]);
      firstPath.set(dir, path);
    } else list.push(base);
  }
  return { names, firstPath };
}

/**
 * One line per directory, in first-seen order: `dir/ (n): a b c …(+k more)`. The count is always
 * exact; at most `maxPerGroup` names are listed. With `root` (see {@link commonRoot}) each
 * directory and path under it is written relative to it.
 */
export function renderGroups(groups: DirectoryGroups, maxPerGroup: number, root = ''): string[] {
  const out: string[] = [];
  for (const [dir, names] of groups.names) {
    const shown = names.slice(0, maxPerGroup).join(' ');
    const more = names.length > maxPerGroup ? ` \u2026(+${names.length - maxPerGroup} more)` : '';
    out.push(
      names.length === 1
        ? underRoot(groups.firstPath.get(dir)!, root)
        : `${underRoot(dir, root)} (${names.length}): ${shown}${more}`,
    );
  }
  return out;
}

/** A common directory prefix shorter than this is not worth a line of its own. */
export const MIN_ROOT_CHARS = 12;

/**
 * The longest directory prefix (ending in `/`) that at least nine in ten of `dirs` (each ending in
 * `/`) share, when it is at least {@link MIN_ROOT_CHARS} long and three directories or more share
 * it; else ''. A listing of a deep tree repeats such a root on every line: said once, the names it
 * is about get the room. (Nine in ten, not all: a listing cut in its middle by the host has a
 * line or two that lost their start.)
 */
export function commonRoot(dirs: readonly string[]): string {
  if (dirs.length < 3) return '';
  const need = Math.max(3, Math.ceil(dirs.length * 0.9));
  const candidates = new Set<string>();
  for (const d of dirs.slice(0, 3))
    for (let k = d.indexOf('/'); k !== -1; k = d.indexOf('/', k + 1))
      if (k + 1 >= MIN_ROOT_CHARS) candidates.add(d.slice(0, k + 1));
  let best = '';
  for (const c of candidates)
    if (c.length > best.length && dirs.filter((d) => d.startsWith(c)).length >= need) best = c;
  return best;
}

/** `path` relative to `root` when it is under it ('./' for the root itself), else unchanged. */
export function underRoot(path: string, root: string): string {
  return root === '' || !path.startsWith(root) ? path : path.slice(root.length) || './';
}

/** The line that names the root the lines after it are written relative to. */
export function rootLine(root: string): string {
  return `[directories below are relative to ${root}]`;
}
