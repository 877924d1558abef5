/**
 * `npm run bench -- cap [iterations]`: overhead of the output-budget cap per request with the
 * tiktoken counter on a ~100k-token Chat Completions request, uncached (empty memo) and cached
 * (memo warm, request rebuilt as new objects), plus the incremental case (history cached, one new
 * message). Baseline, same run: serializing the request once with canonicalJson (and JSON.stringify).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { budgetCounterFrom, createOutputBudget } from '../src/budget/index.js';
import { canonicalJson, createTiktokenCounter } from '../src/measure/index.js';
import { createStep, type ProviderRequest } from '../src/step.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Real text for the messages: this repository's own TypeScript sources, then rxjs's. */
function corpus(minChars: number): string[] {
  const files: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (/\.(ts|js)$/.test(name)) files.push(path);
    }
  };
  for (const dir of ['src', 'operators', 'test', join('node_modules', 'rxjs', 'src')]) {
    try {
      walk(join(root, dir));
    } catch {
      // missing directory: skip
    }
  }
  const texts: string[] = [];
  let total = 0;
  for (const f of files) {
    const text = readFileSync(f, 'utf8').slice(0, 6000);
    texts.push(text);
    total += text.length;
    if (total >= minChars) break;
  }
  return texts;
}

function buildRequest(texts: readonly string[]): ProviderRequest {
  const messages: Array<Record<string, unknown>> = [{ role: 'system', content: 'You are a coding agent.' }];
  texts.forEach((text, i) => {
    const id = `call_${i}`;
    messages.push({
      role: 'assistant',
      content: null,
      tool_calls: [
        { id, type: 'function', function: { name: 'read_file', arguments: JSON.stringify({ path: `f${i}.ts` }) } },
      ],
    });
    messages.push({ role: 'tool', tool_call_id: id, content: text });
  });
  messages.push({ role: 'user', content: 'Summarize the changes.' });
  return { model: 'gpt-5', messages, max_completion_tokens: 32_000 };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
}

async function time(n: number, fn: (i: number) => Promise<unknown> | unknown): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await fn(i);
    samples.push(performance.now() - t0);
  }
  return median(samples);
}

export async function main(argv: string[]): Promise<void> {
  const iterations = Math.max(3, Number(argv[0] ?? 7) || 7);
  const tiktoken = createTiktokenCounter('o200k_base');
  try {
    const texts = corpus(420_000);
    const request = buildRequest(texts);
    const promptTokens = tiktoken.count(canonicalJson(request, { compact: true }));
    const chars = canonicalJson(request).length;
    const route = { model: 'gpt-5', contextWindow: 400_000 };
    const signal = new AbortController().signal;
    const step = (r: ProviderRequest) => createStep(r, { sessionId: 'bench' });
    console.log(
      `request: ${(request['messages'] as unknown[]).length} messages, ${chars.toLocaleString()} chars, ~${promptTokens.toLocaleString()} o200k tokens; median of ${iterations}`,
    );

    const baseline = await time(iterations, () => canonicalJson(request));
    const stringify = await time(iterations, () => JSON.stringify(request));

    const floor = await time(Math.min(iterations, 3), () => tiktoken.count(canonicalJson(request, { compact: true })));
    const uncached = await time(iterations, async () => {
      const run = createOutputBudget('bench', { route, counter: budgetCounterFrom(tiktoken) }).open();
      await run.apply(step(request), signal);
    });

    const warm = createOutputBudget('bench', { route, counter: budgetCounterFrom(tiktoken) }).open();
    const first = await warm.apply(step(request), signal);
    const cached = await time(iterations, async () => warm.apply(step(structuredClone(request)), signal));
    let grown = request;
    const incremental = await time(iterations, async (i) => {
      grown = {
        ...grown,
        messages: [
          ...(grown['messages'] as unknown[]),
          { role: 'user', content: `follow-up ${i}: ${texts[i % texts.length]?.slice(0, 2000) ?? ''}` },
        ],
      };
      await warm.apply(step(grown), signal);
    });
    const cap = first.value['max_completion_tokens'];
    const byIdentity = createOutputBudget('bench', {
      route,
      counter: budgetCounterFrom(tiktoken, { identityCache: true }),
    }).open();
    await byIdentity.apply(step(request), signal);
    const identity = await time(iterations, async () =>
      byIdentity.apply(step({ ...request, messages: [...(request['messages'] as unknown[])] }), signal),
    );

    const row = (label: string, ms: number): string =>
      `${label.padEnd(44)} ${ms.toFixed(2).padStart(9)} ms   ${(ms / baseline).toFixed(2).padStart(7)}× baseline`;
    console.log(row('baseline: canonicalJson(request) once', baseline));
    console.log(row('JSON.stringify(request) once', stringify));
    console.log(row('tiktoken count of the whole request once', floor));
    console.log(row('cap, uncached (empty memo, tiktoken)', uncached));
    console.log(row('cap, cached (memo warm, new objects)', cached));
    console.log(row('cap, history cached + 1 new 2 KB message', incremental));
    console.log(row('cap, cached, same message objects (identity)', identity));
    console.log(`inserted cap: max_completion_tokens = ${String(cap)} (W = ${route.contextWindow})`);
  } finally {
    tiktoken.dispose?.();
  }
}
