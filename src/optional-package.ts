/**
 * Optional peer packages, loaded on first use. The operators, the vault on SQLite, the adapters
 * and the gateway need none of them; PostgreSQL (`pg`), the report's charts
 * (`@observablehq/plot`, `linkedom`), tokenizer.json counting (`@huggingface/tokenizers`) and the
 * reference tiktoken engine (`tiktoken`) do, and each is required only when that feature runs, so
 * `npm install token-terminator` stays light. `require` (not `import()`) keeps the callers
 * synchronous; Node ≥ 20.19 requires ES modules as well.
 */
import { createRequire } from 'node:module';
import { TokenTerminatorError } from './errors.js';

/**
 * The optional peers, each with the range `package.json` declares and what needs it. Packages one
 * feature needs together (`with`) are named together in its error, so one command installs them all
 * instead of the user meeting them one at a time.
 */
export const OPTIONAL_PACKAGES = Object.freeze({
  pg: { range: '^8.23.1', feature: 'a PostgreSQL vault or ledger (postgres:// URL)' },
  '@observablehq/plot': {
    range: '^0.6.17',
    feature: 'the report and the dashboard charts',
    with: ['linkedom'],
  },
  linkedom: { range: '^0.18.15', feature: 'the report and the dashboard charts', with: ['@observablehq/plot'] },
  '@huggingface/tokenizers': { range: '^0.2.0', feature: 'counting with a tokenizer.json' },
  tiktoken: { range: '^1.0.22', feature: "the reference tiktoken engine (engine: 'wasm')" },
} as const);

/** A package name {@link loadOptionalPackage} knows. */
export type OptionalPackageName = keyof typeof OPTIONAL_PACKAGES;

/**
 * A feature needs an optional peer package that is not installed (error code
 * `E_MISSING_PACKAGE`); the message names the package and the one command that installs it with
 * the packages the same feature needs beside it.
 *
 * @example
 * import { MissingPackageError } from 'token-terminator';
 * if (error instanceof MissingPackageError) console.error(error.message); // … npm install pg@^8.23.1
 */
export class MissingPackageError extends TokenTerminatorError {
  /** The package to install. */
  readonly packageName: string;
  /** The command that installs it and the packages its feature needs with it. */
  readonly installCommand: string;
  constructor(
    packageName: string,
    feature: string,
    range: string,
    options?: ErrorOptions & { readonly with?: readonly string[] },
  ) {
    const together = [
      `${packageName}@${range}`,
      ...(options?.with ?? []).map((name) => `${name}@${OPTIONAL_PACKAGES[name as OptionalPackageName].range}`),
    ];
    const installCommand = `npm install ${together.join(' ')}`;
    super(
      'E_MISSING_PACKAGE',
      `the optional package "${packageName}" is not installed (needed for ${feature}${together.length > 1 ? `, with ${together.slice(1).join(', ')}` : ''}): ${installCommand}`,
      options,
    );
    this.packageName = packageName;
    this.installCommand = installCommand;
  }
}

const requireHere = createRequire(import.meta.url);

/** True when `error` says `name` itself (not one of its own dependencies) could not be found. */
function isNotFound(error: unknown, name: string): boolean {
  const e = error as { code?: unknown; message?: unknown } | null;
  return (
    e !== null &&
    typeof e === 'object' &&
    (e.code === 'MODULE_NOT_FOUND' || e.code === 'ERR_MODULE_NOT_FOUND') &&
    typeof e.message === 'string' &&
    e.message.includes(`'${name}'`)
  );
}

/**
 * The package `name`, loaded now (Node caches it).
 *
 * @param from - the `require` that resolves it; default: one beside this file (the user's node_modules).
 * @throws MissingPackageError when the package is not installed.
 * @example
 * const pg = loadOptionalPackage<typeof import('pg')>('pg');
 */
export function loadOptionalPackage<T>(name: OptionalPackageName, from: NodeJS.Require = requireHere): T {
  const entry: { range: string; feature: string; with?: readonly string[] } = OPTIONAL_PACKAGES[name];
  try {
    return from(name) as T;
  } catch (error) {
    if (isNotFound(error, name))
      throw new MissingPackageError(name, entry.feature, entry.range, {
        cause: error,
        ...(entry.with === undefined ? {} : { with: entry.with }),
      });
    throw error;
  }
}
