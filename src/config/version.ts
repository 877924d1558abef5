import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The package version, read from the nearest `package.json` named `token-terminator` above this file.
 * Walking up works both from `src/config` (tsx) and from `dist/src/config` (built); a bundled or
 * relocated copy without a package.json reports `0.0.0` rather than failing.
 */
export const PACKAGE_VERSION: string = findVersion();

function findVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let depth = 0; depth < 6; depth += 1) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: unknown; version?: unknown };
      if (pkg.name === 'token-terminator' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // No package.json at this level: keep walking up.
    }
    const parent = dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  return '0.0.0';
}
