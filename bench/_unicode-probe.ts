/**
 * `npx tsx bench/_unicode-probe.ts [--near] [--encoding o200k_base|cl100k_base]`: every code point
 * through the JS engine and tiktoken's WASM in a few probe strings each, printing the code points
 * where the counts differ, as hex ranges. Not run by `npm run bench` (a few minutes).
 *
 * Rerun it when Node's Unicode version changes (`process.versions.unicode`): a character Node's
 * regex tables know and the reference's do not is classified differently by the two pre-tokenizers
 * (src/measure/encoders.ts, NEWER_THAN_REFERENCE).
 *
 * `--near`: only the code points of NEWER_THAN_REFERENCE and 16 on each side of every range,
 * with more probe shapes (contractions, digit runs, case mixes, whitespace).
 */
import { acquireEncoder, TIKTOKEN_ENCODINGS, type TiktokenEncodingName } from '../src/measure/index.js';
import { NEWER_THAN_REFERENCE } from '../src/measure/encoders.js';

type Probe = (c: string) => string;

const EVERY: readonly Probe[] = [
  (c) => `a${c}b`,
  (c) => `${c}'s`,
  (c) => ` ${c}${c}`,
  (c) => `1${c}x`,
  (c) => `"${c}\\u`,
];

const NEAR: readonly Probe[] = [
  ...EVERY,
  (c) => `${c}'S`,
  (c) => `${c}'ll`,
  (c) => `x${c}'ve `,
  (c) => `123${c}`,
  (c) => `${c}4567`,
  (c) => `A${c}b`,
  (c) => `a${c}B`,
  (c) => `${c}Ab`,
  (c) => `AB${c}cd`,
  (c) => `\n${c} `,
  (c) => `\t ${c}\n\n`,
  (c) => `${c}\r\n/`,
  (c) => `  ${c}  x`,
  (c) => `${c}${c}${c}`,
  (c) => `.${c}.`,
  (c) => `é${c}̀`,
];

function* everyCodePoint(): Generator<number> {
  for (let cp = 0; cp <= 0x10ffff; cp++) if (cp < 0xd800 || cp > 0xdfff) yield cp;
}

function* nearTable(): Generator<number> {
  const seen = new Set<number>();
  for (const [from, to] of NEWER_THAN_REFERENCE)
    for (let cp = Math.max(0, from - 16); cp <= Math.min(0x10ffff, to + 16); cp++)
      if ((cp < 0xd800 || cp > 0xdfff) && !seen.has(cp)) {
        seen.add(cp);
        yield cp;
      }
}

function ranges(cps: readonly number[]): string {
  const out: string[] = [];
  for (let i = 0; i < cps.length;) {
    let j = i;
    while (j + 1 < cps.length && cps[j + 1] === cps[j]! + 1) j++;
    const hex = (n: number): string => n.toString(16);
    out.push(i === j ? hex(cps[i]!) : `${hex(cps[i]!)}-${hex(cps[j]!)}`);
    i = j + 1;
  }
  return out.join(' ');
}

function probe(encoding: TiktokenEncodingName, codePoints: Iterable<number>, probes: readonly Probe[]): void {
  const js = acquireEncoder(encoding, 'js');
  const wasm = acquireEncoder(encoding, 'wasm');
  const t0 = performance.now();
  const differing: number[] = [];
  let compared = 0;
  try {
    for (const cp of codePoints) {
      const c = String.fromCodePoint(cp);
      compared++;
      for (const p of probes) {
        const s = p(c);
        if (js.count(s) !== wasm.count(s)) {
          differing.push(cp);
          break;
        }
      }
    }
  } finally {
    js.release();
    wasm.release();
  }
  console.log(
    `${encoding}: ${compared} code points × ${probes.length} probes in ${((performance.now() - t0) / 1000).toFixed(0)} s (Node ${process.version}, Unicode ${process.versions.unicode ?? '?'}): ${differing.length} differ${differing.length === 0 ? '' : `\n  ${ranges(differing)}`}`,
  );
}

const argv = process.argv.slice(2);
const near = argv.includes('--near');
const at = argv.indexOf('--encoding');
const encodings = at >= 0 ? [argv[at + 1] as TiktokenEncodingName] : TIKTOKEN_ENCODINGS;
for (const encoding of encodings) probe(encoding, near ? nearTable() : everyCodePoint(), near ? NEAR : EVERY);
