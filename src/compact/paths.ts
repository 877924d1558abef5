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

/** Paths grouped by directory, in first-seen order: see {@link groupByDirectory}. */
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

/** The lines of {@link groupByDirectory} for groups built by {@link directoryGroups}. */
export function renderGroups(groups: DirectoryGroups, maxPerGroup: number): string[] {
  const out: string[] = [];
  for (const [dir, names] of groups.names) {
    const shown = names.slice(0, maxPerGroup).join(' ');
    const more = names.length > maxPerGroup ? ` \u2026(+${names.length - maxPerGroup} more)` : '';
    out.push(names.length === 1 ? groups.firstPath.get(dir)! : `${dir} (${names.length}): ${shown}${more}`);
  }
  return out;
}

/**
 * One line per directory, in first-seen order: `dir/ (n): a b c …(+k more)`. The count is always
 * exact; at most `maxPerGroup` names are listed.
 */
export function groupByDirectory(paths: readonly string[], maxPerGroup: number): string[] {
  return renderGroups(directoryGroups(paths), maxPerGroup);
}
