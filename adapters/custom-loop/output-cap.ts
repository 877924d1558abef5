/**
 * The default reader of provider output-cap errors used by the client wrappers.
 *
 * TEMPORARY: src/budget (parseOutputCapError) has not landed yet; until it does, the default
 * recognises nothing and the wrappers retry only when the caller passes `parseOutputCapError`.
 */
export function defaultParseOutputCapError(_error: unknown): number | undefined {
  return undefined;
}
