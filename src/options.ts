/**
 * The one validator of build-time operator options. Every operator checks its options when it is
 * built (never per Step), and every bad option throws a {@link ConfigError} that names the API and
 * the option: `compressToolResult: options.maxArtifactChars must be an integer ≥ 1 (got 0)`.
 */
import { ConfigError } from './errors.js';

const show = (value: unknown): string => (typeof value === 'string' ? JSON.stringify(value) : String(value));

/**
 * An integer option in `[min, max]`, or `fallback` when it is `undefined`.
 *
 * @throws ConfigError naming `api` and `options.<name>`.
 * @example
 * const minChars = intOption('collapseDuplicates', 'minArtifactChars', options.minArtifactChars, 8000, 1);
 */
export function intOption(
  api: string,
  name: string,
  value: number | undefined,
  fallback: number,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number {
  const v = value ?? fallback;
  if (!Number.isInteger(v) || v < min || v > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `≥ ${min}` : `in [${min}, ${max}]`;
    throw new ConfigError(`${api}: options.${name} must be an integer ${range} (got ${show(value)})`);
  }
  return v;
}

/** A finite number option, or `fallback` when it is `undefined`. @throws ConfigError. */
export function numberOption(api: string, name: string, value: number | undefined, fallback: number): number {
  const v = value ?? fallback;
  if (typeof v !== 'number' || !Number.isFinite(v))
    throw new ConfigError(`${api}: options.${name} must be a finite number (got ${show(value)})`);
  return v;
}

/** One of `allowed`, or `fallback` when it is `undefined`. @throws ConfigError listing the choices. */
export function oneOfOption<T extends string>(
  api: string,
  name: string,
  value: T | undefined,
  fallback: T,
  allowed: readonly T[],
): T {
  const v = value ?? fallback;
  if (!allowed.includes(v))
    throw new ConfigError(`${api}: options.${name} must be one of ${allowed.join(', ')} (got ${show(value)})`);
  return v;
}

/** An array of strings, or `fallback` when it is `undefined`. @throws ConfigError. */
export function stringsOption(
  api: string,
  name: string,
  value: readonly string[] | undefined,
  fallback: readonly string[],
): readonly string[] {
  const v = value ?? fallback;
  if (!Array.isArray(v) || !v.every((s) => typeof s === 'string'))
    throw new ConfigError(`${api}: options.${name} must be an array of strings`);
  return v;
}

/**
 * The vault an operator writes evidence to: present and a vault (it has `put`).
 *
 * @throws ConfigError `<api>: options.vault is required` when it is missing or not a vault.
 */
export function requireVault<V extends { put: unknown }>(api: string, options: { vault?: V } | undefined): V {
  const vault = options?.vault;
  if (vault === undefined || vault === null || typeof vault.put !== 'function')
    throw new ConfigError(`${api}: options.vault is required (a vault from createVault)`);
  return vault;
}

/** A rule between two options, checked once both are read. @throws ConfigError with `message`. */
export function checkOptions(api: string, ok: boolean, message: string): void {
  if (!ok) throw new ConfigError(`${api}: ${message}`);
}

/** `fields` without its undefined values: optional fields under `exactOptionalPropertyTypes`. */
export function definedFields<T extends object>(fields: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as {
    [K in keyof T]?: Exclude<T[K], undefined>;
  };
}
