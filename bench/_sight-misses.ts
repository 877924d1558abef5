/**
 * `npx tsx bench/_sight-misses.ts <sessions.jsonl> <dump.jsonl> [n]`: where the lines and words the
 * agent used were out of sight, from a `replay [--window W] --dump` run's final requests. For each
 * used item (src/replay/sight.ts) not in the final request, the earlier outputs that hold it and how
 * each is shown: `verbatim`, `digest`, `receipt`, `block` (the request holds a block of turns, so
 * positions do not map) or `other` (a first-view reduction or a rendering of another stage), and how
 * many turns back the newest of them is. Prints counts per rendering and age (lines, words), then
 * the first `n` misses (default 0) one JSON line each.
 */
import { readFileSync } from 'node:fs';
import { chatActions } from '../src/compile/actions.js';
import { observationTest } from '../src/compile/observations.js';
import { readSessions } from '../src/replay/index.js';
import { stringsOf } from '../src/measure/canonical-json.js';
import { actionValues, FidelityTracker } from '../src/replay/fidelity.js';
import { useCandidates } from '../src/replay/sight.js';

type Obj = Record<string, unknown>;
const [path, dumpPath, shown] = process.argv.slice(2);
const finals = new Map<string, Obj[]>();
for (const line of readFileSync(dumpPath!, 'utf8').split('\n')) {
  if (line === '') continue;
  const d = JSON.parse(line) as { session: string; index: number; final: { messages: Obj[] } };
  finals.set(`${d.session}#${d.index}`, d.final.messages);
}
const text = (m: Obj): string => {
  const c = m['content'];
  if (typeof c === 'string') return c;
  return Array.isArray(c) ? c.map((p) => String((p as Obj)['text'] ?? '')).join('\n') : '';
};
const counts = new Map<string, { lines: number; words: number }>();
const add = (key: string, line: boolean): void => {
  const c = counts.get(key) ?? { lines: 0, words: 0 };
  if (line) c.lines++;
  else c.words++;
  counts.set(key, c);
};
let printed = 0;
for (const s of await readSessions(path!, Infinity)) {
  const msgs = s.messages as Obj[];
  const fidelity = new FidelityTracker(msgs, observationTest('replay', undefined));
  let k = 0;
  for (let i = 1; i < msgs.length; i++) {
    if (msgs[i]!['role'] !== 'assistant') continue;
    const final = finals.get(`${s.id}#${k++}`);
    if (final === undefined) continue;
    const finalJson = JSON.stringify(final);
    const present = (x: string): boolean => finalJson.includes(JSON.stringify(x).slice(1, -1));
    const blocks = final.some((m) => text(m).startsWith('[Token Terminator turns'));
    const rendering = (j: number): string => {
      if (blocks) return 'block';
      const t = text(final[j] ?? {});
      if (t === text(msgs[j]!)) return 'verbatim';
      if (t.startsWith('[Token Terminator digest')) return 'digest';
      if (t.startsWith('[Token Terminator artifact') || t.startsWith('[Token Terminator receipt')) return 'receipt';
      return 'other';
    };
    const other: string[] = [];
    const outputs: { j: number; t: string }[] = [];
    for (let j = 0; j < i; j++) {
      const m = msgs[j]!;
      if (fidelity.isOutput(j)) outputs.push({ j, t: text(m) });
      else {
        other.push(...stringsOf(m));
        if (m['role'] === 'assistant') for (const a of chatActions(m)) other.push(...actionValues(a));
      }
    }
    const otherJoined = other.join('\u0000');
    const { words, lines } = useCandidates(chatActions(msgs[i]!).flatMap((a) => actionValues(a)));
    const visit = (x: string, line: boolean): void => {
      const holders = outputs.filter((o) => o.t.includes(x));
      if (holders.length === 0 || otherJoined.includes(x) || present(x)) return;
      const newest = holders.at(-1)!.j;
      const age = msgs.slice(newest, i).filter((m) => m['role'] === 'assistant').length;
      const band = age <= 1 ? 'age ≤1' : age <= 3 ? 'age 2-3' : age <= 8 ? 'age 4-8' : 'age ≥9';
      const how = [...new Set(holders.map((h) => rendering(h.j)))].sort().join('+');
      add(`${how} | ${band}`, line);
      if (printed++ < Number(shown ?? 0))
        console.log(
          JSON.stringify({ session: s.id, i, item: x.slice(0, 80), holders: holders.map((h) => h.j), how, age }),
        );
    };
    for (const l of lines) visit(l, true);
    for (const w of words) visit(w, false);
  }
}
console.log('rendering | newest holder age: missing lines, words');
for (const [key, c] of [...counts].sort()) console.log(`${key}: ${c.lines}, ${c.words}`);
