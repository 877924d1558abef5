/**
 * What the report draws: the figures `replay --json` prints (optionally with `--series`), or the same
 * shape built from a vault's metrics rows. Every key beyond the request and token counts is
 * optional, because the report must draw whatever a replay of any version measured and say
 * "not measured" for the rest. Only numbers, stage names, profile names and session ids: never
 * prompt or tool text.
 */
import { z } from 'zod';
import { TokenTerminatorError } from '../errors.js';

/** The fidelity figures of `replay` (defined in docs/fidelity.md): percentages, and prefix reuse as a ratio. */
export const FIDELITY_KEYS = [
  'task_visible_pct',
  'actions_visible_pct',
  'diagnostics_visible_pct',
  'grounding_pct',
  'use_lines_pct',
  'use_words_pct',
  'prefix_reuse',
] as const;
/** One of {@link FIDELITY_KEYS}. */
export type FidelityKey = (typeof FIDELITY_KEYS)[number];

const count = z.number().int().nonnegative();
const finite = z.number().finite();

const point = z.object({
  raw_tokens: count,
  final_tokens: count,
  raw_chars: count.optional(),
  final_chars: count.optional(),
  receipts: count.optional(),
  saved_by_stage: z.record(z.string(), finite).optional(),
});

/** Keys every level (whole run, one session) may carry. Unknown keys are kept, not rejected. */
const levelShape = {
  requests: count,
  raw_tokens: count,
  final_tokens: count,
  reduction_pct: finite.optional(),
  raw_chars: count.optional(),
  final_chars: count.optional(),
  receipts: count.optional(),
  recovered_exact: count.optional(),
  recovery_failures: count.optional(),
  recovery_calls: count.optional(),
  simulated_recoveries: count.optional(),
  recovery_tokens: count.optional(),
  requests_over_window_raw: count.optional(),
  requests_over_window_sent: count.optional(),
  window_rewrites: count.optional(),
  requests_window_unfittable: count.optional(),
  output_tokens: count.optional(),
  cache_read_tokens: count.optional(),
  cache_write_tokens: count.optional(),
  effective_cost_raw: finite.optional(),
  effective_cost_final: finite.optional(),
  saved_by_stage: z.record(z.string(), finite).optional(),
  ...Object.fromEntries(FIDELITY_KEYS.map((k) => [k, finite.optional()])),
};

const session = z.looseObject({ id: z.string(), ...levelShape, per_request: z.array(point).optional() });
const input = z.looseObject({
  ...levelShape,
  /** Sessions the totals count, when the page lists only some of them (a gateway lists the caller's own). */
  session_count: count.optional(),
  sessions: z.array(session),
});

/** One request's point of a `--series` replay: its raw and sent token counts and what each stage saved. */
export type RequestPointInput = z.infer<typeof point>;
/** One session's figures in the report input, with its fidelity figures when they were measured. */
export type ReportSessionInput = z.infer<typeof session> & Partial<Record<FidelityKey, number>>;
/** The figures the report renders (replay JSON, or {@link readVaultFigures}). */
export type ReportInput = z.infer<typeof input> & Partial<Record<FidelityKey, number>>;

/** A figures file that is not replay figures. Names the offending key path, never a value. */
export class ReportInputError extends TokenTerminatorError {
  constructor(message: string) {
    super('E_REPORT_INPUT', message);
  }
}

/**
 * Validate parsed JSON as report figures.
 *
 * @example
 * const figures = parseReportInput(JSON.parse(await readFile('figures.json', 'utf8')));
 */
export function parseReportInput(value: unknown): ReportInput {
  const parsed = input.safeParse(value);
  if (parsed.success) return parsed.data as ReportInput;
  const issue = parsed.error.issues[0]!;
  const where = issue.path.length === 0 ? 'the top level' : issue.path.join('.');
  throw new ReportInputError(`not replay figures (replay --json): ${where}: ${issue.message}`);
}

/** One pricing profile's effective-cost ratio (final / raw; raw = 1). */
export interface CostProfile {
  readonly name: string;
  readonly ratio: number;
  /** The JSON key (path) the ratio was read from. */
  readonly key: string;
}

/**
 * Effective-cost ratios of one level, by pricing profile. Read from `effective_cost_ratio` (the
 * replay's own cache-read price), `effective_cost_ratio_<profile>` numbers, and objects of numbers
 * under any key that starts with `effective_cost_ratio` (`{openai: 0.53, anthropic: 0.56}`), so the
 * report follows however a replay names its profiles.
 *
 * @example
 * import { costProfiles } from 'token-terminator/report';
 * costProfiles({ effective_cost_ratio: { openai: 0.53, anthropic: 0.56 } });
 * // two profiles, openai 0.53 and anthropic 0.56
 */
export function costProfiles(level: Readonly<Record<string, unknown>>): CostProfile[] {
  return profilesUnder(level, 'effective_cost_ratio', true);
}

/**
 * Effective-cost ratios with the simulated recoveries priced in (`effective_cost_with_recoveries_ratio`
 * and its `_<profile>` variants), by pricing profile, named as {@link costProfiles} names them.
 *
 * @example
 * import { recoveryCostProfiles } from 'token-terminator/report';
 * recoveryCostProfiles({ effective_cost_with_recoveries_ratio_openai: 0.66 }); // [{ name: 'openai', ratio: 0.66, … }]
 */
export function recoveryCostProfiles(level: Readonly<Record<string, unknown>>): CostProfile[] {
  return profilesUnder(level, 'effective_cost_with_recoveries_ratio', false);
}

/** The finite ratios under keys starting with `prefix`, and with `nested` those inside objects under such keys. */
function profilesUnder(level: Readonly<Record<string, unknown>>, prefix: string, nested: boolean): CostProfile[] {
  const out: CostProfile[] = [];
  for (const [key, value] of Object.entries(level)) {
    if (!key.startsWith(prefix)) continue;
    if (typeof value === 'number' && Number.isFinite(value)) {
      const name = key.slice(prefix.length).replace(/^_/, '');
      out.push({ name: name === '' ? 'replay cache-read price' : name, ratio: value, key });
    } else if (nested && typeof value === 'object' && value !== null && !Array.isArray(value)) {
      for (const [name, v] of Object.entries(value as Record<string, unknown>)) {
        if (typeof v === 'number' && Number.isFinite(v)) out.push({ name, ratio: v, key: `${key}.${name}` });
      }
    }
  }
  return out;
}

/** Saved chars per mechanism for a level: its own `saved_by_stage`, else the sum over its series. */
export function savedByStage(level: ReportInput): Record<string, number> | undefined {
  if (level.saved_by_stage !== undefined) return { ...level.saved_by_stage };
  const all = level.sessions.flatMap((s) => s.per_request ?? []);
  if (all.length === 0 || all.every((p) => p.saved_by_stage === undefined)) return undefined;
  const out: Record<string, number> = {};
  for (const p of all) for (const [k, v] of Object.entries(p.saved_by_stage ?? {})) out[k] = (out[k] ?? 0) + v;
  return out;
}
