/**
 * The default TOKEN_TERMINATOR_OBSERVATION_PATTERN: user-role messages of text-protocol agents
 * that carry command output (docs/fidelity.md, "Text-protocol agents"). Only messages after the
 * instruction prefix are ever tested, and a match is needed: size alone never makes a user message
 * an output. Recognised by default:
 * - mini-swe-agent's observation template, which opens with `<returncode>N</returncode>`;
 * - SWE-agent's `OBSERVATION:` step template (1.x);
 * - SWE-agent 0.x's state suffix, `(Current directory: …)` followed by the `bash-$` prompt.
 */
export const DEFAULT_OBSERVATION_PATTERN = String.raw`^\s*(?:<returncode>-?\d+</returncode>|OBSERVATION:)|\(Current directory: [^\n]*\)\s*\nbash-\$\s*$`;
