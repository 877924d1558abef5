import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { InvalidArgumentError, Option, type Command } from 'commander';
import {
  CHECKPOINT_PAIRS,
  DEFAULT_MARGIN,
  EvalAbortedError,
  estimateEval,
  FINAL_PAIRS,
  runEval,
  type Analysis,
  type EvalOptions,
  type EvalResults,
} from '../../eval/index.js';
import { definedFields } from '../../options.js';
import { CliError, integerAtLeast, numberArg, readJson, writeJson, writeOut } from '../context.js';

type EvalCliOptions = Pick<EvalOptions, 'baseUrl' | 'balancedBaseUrl' | 'model' | 'seed' | 'margin' | 'maxRounds'> & {
  pairs: string;
  out?: string;
  apiKeyEnv: string;
  temperature: number | null;
  timeout?: number;
  dryRun?: boolean;
  json?: boolean;
  resume?: string;
};

function readResume(path: string): EvalResults {
  const value = readJson(path, 'eval results (eval --out)');
  const r = value as Partial<EvalResults>;
  if (r.harness !== 'token-terminator eval' || !Array.isArray(r.pairs) || typeof r.protocol?.seed !== 'number')
    throw new CliError(`${path} is not eval --out results`);
  return value as EvalResults;
}

const marginArg = numberArg((n) => n > 0 && n < 0.5, 'a number within (0, 0.5), e.g. 0.1 for 10 points');
const temperature = numberArg((n) => n >= 0 && n <= 2, 'a number within [0, 2], or "none" to send no temperature');
const temperatureArg = (value: string): number | null => (value === 'none' ? null : temperature(value));

function seedArg(value: string): number {
  if (!/^\d+$/.test(value.trim()) || Number(value) > 0xffffffff)
    throw new InvalidArgumentError('must be an integer within [0, 4294967295]');
  return Number(value);
}

const pct = (x: number): string => `${(x * 100).toFixed(1)} %`;

function look(name: string, a: Analysis): string[] {
  return [
    `${name} (${a.pairs} pairs): off ${a.off_correct}/${a.pairs} correct (${pct(a.off_accuracy)}), balanced ${a.balanced_correct}/${a.pairs} (${pct(a.balanced_accuracy)})`,
    `  discordant pairs: only off correct b = ${a.b}, only balanced correct c = ${a.c}`,
    `  harm p (exact McNemar, one-sided) = ${a.harm_p}; non-inferiority p (exact, margin ${a.margin}) = ${a.noninferiority_p}, Tango z = ${a.tango_z}`,
    `  verdict at this look: ${a.verdict}`,
  ];
}

/** The human-readable result: the verdict and its rule first, savings after. */
export function renderEvalResults(r: EvalResults): string {
  const s = r.savings;
  const lines = [
    `VERDICT: ${r.verdict}   (${r.status}; ${r.pairs.length} of ${r.protocol.planned_pairs} planned pairs; seed ${r.protocol.seed})`,
    ...(r.abort_reason === undefined ? [] : [`aborted: ${r.abort_reason}`]),
    `model: ${r.identity?.model ?? r.protocol.model}, system_fingerprint: ${r.identity?.system_fingerprint ?? 'none'}`,
    '',
    r.protocol.rule,
    '',
    ...(r.checkpoint === undefined ? [] : look('checkpoint', r.checkpoint)),
    ...(r.final === undefined ? [] : look('final', r.final)),
    '',
    'Savings (secondary; they cannot change the verdict):',
    `  prompt tokens: off ${s.off.prompt_tokens}, balanced ${s.balanced.prompt_tokens} (${Math.abs(s.prompt_tokens_saved_pct)} % ${s.prompt_tokens_saved_pct < 0 ? 'more' : 'fewer'})`,
    `  completion tokens: off ${s.off.completion_tokens}, balanced ${s.balanced.completion_tokens}`,
    `  requests: off ${s.off.requests}, balanced ${s.balanced.requests}; recovery calls ${s.balanced.recovery_calls} returning ${s.balanced.recovery_tokens} tokens`,
  ];
  return `${lines.join('\n')}\n`;
}

async function evaluate(options: EvalCliOptions): Promise<void> {
  const pairs = Number(options.pairs);
  const apiKey = process.env[options.apiKeyEnv];
  const { baseUrl, balancedBaseUrl, model, margin, temperature, seed, maxRounds } = options;
  const run: EvalOptions = {
    baseUrl,
    model,
    pairs,
    temperature,
    ...definedFields({ balancedBaseUrl, margin, seed, maxRounds }),
    ...(options.resume === undefined ? {} : { resume: readResume(options.resume) }),
    ...(apiKey === undefined || apiKey === '' ? {} : { apiKey }),
    ...(options.timeout === undefined ? {} : { timeoutMs: options.timeout * 1000 }),
  };
  if (options.dryRun === true) {
    const e = await estimateEval(run);
    if (options.json === true) return writeJson(e);
    return writeOut(
      [
        e.protocol.rule,
        '',
        `dry run, seed ${e.protocol.seed}, ${e.protocol.planned_pairs} pairs (nothing was sent):`,
        `  first request per pair: off ${e.off_first_request_tokens} tokens, balanced ${e.balanced_first_request_tokens} tokens (o200k_base)`,
        `  at least ${e.min_input_tokens} input tokens for the run; up to about ${e.full_recovery_extra_tokens} more if every balanced arm recovers its whole evidence`,
        '',
      ].join('\n'),
    );
  }
  const progress = (text: string): void => void process.stderr.write(text);
  let results: EvalResults;
  try {
    results = await runEval({
      ...run,
      onProtocol: (p) =>
        progress(
          `${p.rule}\nseed ${p.seed}, ${p.planned_pairs} pairs, model ${p.model} at ${p.base_url}, balanced arm via ${p.balanced_via}\n`,
        ),
      onPair: (p, done, planned) =>
        progress(
          `pair ${done}/${planned} (${p.family}, ${p.order.join(' then ')}): off ${p.off.outcome}, balanced ${p.balanced.outcome}\n`,
        ),
    });
  } catch (error) {
    if (error instanceof EvalAbortedError) {
      if (options.out !== undefined) writeFileSync(resolve(options.out), `${JSON.stringify(error.results, null, 2)}\n`);
      throw new CliError(
        `eval aborted: ${error.message}${options.out === undefined ? '' : ` (the ${error.results.pairs.length} completed pairs are in ${options.out})`}`,
        1,
      );
    }
    throw error;
  }
  if (options.out !== undefined) writeFileSync(resolve(options.out), `${JSON.stringify(results, null, 2)}\n`);
  if (options.json === true) return writeJson(results);
  await writeOut(renderEvalResults(results));
}

/** `token-terminator eval`: the paired answer-quality harness against an OpenAI-compatible endpoint. */
export function registerEval(program: Command): void {
  program
    .command('eval')
    .description(
      'paired non-inferiority A/B of answer quality: the same synthetic tasks in fresh off and balanced sessions against one model',
    )
    .requiredOption(
      '--base-url <url>',
      'OpenAI-compatible base URL; <url>/chat/completions is called (e.g. http://127.0.0.1:8000/v1)',
    )
    .option(
      '--balanced-base-url <url>',
      'send the balanced arm unreduced to this endpoint (a token-terminator proxy in balanced mode) instead of reducing in-process',
    )
    .requiredOption('--model <name>', 'model name to request')
    .addOption(
      new Option(
        '--pairs <n>',
        `matched pairs: the ${CHECKPOINT_PAIRS}-pair checkpoint or the precommitted ${FINAL_PAIRS}-pair final`,
      )
        .choices([String(CHECKPOINT_PAIRS), String(FINAL_PAIRS)])
        .default(String(FINAL_PAIRS)),
    )
    .option('--seed <n>', 'seed of the tasks and the arm order (default: random, recorded in the results)', seedArg)
    .option('--margin <x>', `non-inferiority margin on accuracy (default ${DEFAULT_MARGIN} = 10 points)`, marginArg)
    .option(
      '--resume <results.json>',
      'continue a run (the 36-pair checkpoint into the 72-pair final, or an aborted run): its seed, margin and pairs are kept',
    )
    .option('--out <results.json>', 'write the results (also the completed pairs of an aborted run)')
    .option('--api-key-env <name>', 'environment variable holding the bearer token', 'OPENAI_API_KEY')
    .option('--temperature <t>', 'temperature to send, or "none"', temperatureArg, 0)
    .option('--max-rounds <n>', 'model calls per arm before it counts as unanswered (default 8)', integerAtLeast(1))
    .option('--timeout <seconds>', 'per-request timeout (default 120)', integerAtLeast(1))
    .option('--dry-run', 'print the protocol and the tokens a run will send, without sending anything')
    .option('--json', 'print machine-readable JSON')
    .action((options: EvalCliOptions) => evaluate(options));
}
