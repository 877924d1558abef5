/**
 * `npx tsx bench/_window-bound.ts <sessions.jsonl> <dump.jsonl> <W> [R]`: what any lossless window
 * fit could at best achieve at W, per session (perfect foresight), from a `replay --window W --dump`
 * run's final requests. For each request:
 * - core: the instruction prefix, the user messages and the newest turn as sent (what the fit never
 *   touches), counted exactly (o200k, Σ per-message tokens as the cap counts);
 * - actions: every earlier tool call kept verbatim in an assistant item with no prose, each
 *   answered by a receipt-sized tool message (the least a request that shows the action can hold);
 * - used: the lines and words the agent's next action copies from earlier tool outputs
 *   (src/replay/sight.ts) that the core does not already show, as bare strings.
 * Prints per session: requests where core + R > W (nothing can fit), where core + actions + R > W
 * (100 % actions impossible), where core + actions + used + R > W, and the best actions / lines /
 * words shares: actions kept cheapest first in the room core leaves; used lines and words kept
 * cheapest first in the room core and (the actions that fit) leave.
 */
import { readFileSync } from 'node:fs';
import { chatActions } from '../src/compile/actions.js';
import { canonicalJson, createTiktokenCounter } from '../src/measure/index.js';
import { stringsOf } from '../src/measure/canonical-json.js';
import { readSessions } from '../src/replay/index.js';
import { useCandidates } from '../src/replay/sight.js';
import { actionValues } from '../src/replay/fidelity.js';

type Obj = Record<string, unknown>;
const [path, dumpPath, w, r] = process.argv.slice(2);
const W = Number(w);
const R = Number(r ?? 4096);
const counter = createTiktokenCounter('o200k_base');
const tokens = (v: unknown): number => counter.count(canonicalJson(v, { compact: true }));
const RECEIPT =
  '[Token Terminator receipt | artifact 0123456789ab | tool bash | 12345 chars | recover with token_terminator action=artifact_get]';

const finals = new Map<string, Obj[]>();
for (const line of readFileSync(dumpPath!, 'utf8').split('\n')) {
  if (line === '') continue;
  const d = JSON.parse(line) as { session: string; index: number; final: { messages: Obj[] } };
  finals.set(`${d.session}#${d.index}`, d.final.messages);
}

const text = (m: Obj): string => stringsOf(m['content']).join('\n');
const totals = { requests: 0, core: 0, actions: 0, all: 0, ac: 0, av: 0, lc: 0, lv: 0, wc: 0, wv: 0 };
for (const s of await readSessions(path!, Infinity)) {
  const msgs = s.messages as Obj[];
  const first = msgs.findIndex((m) => m['role'] === 'assistant');
  const t = { requests: 0, core: 0, actions: 0, all: 0, ac: 0, av: 0, lc: 0, lv: 0, wc: 0, wv: 0 };
  let k = 0;
  for (let i = 1; i < msgs.length; i++) {
    if (msgs[i]!['role'] !== 'assistant') continue;
    const final = finals.get(`${s.id}#${k++}`);
    if (final === undefined) continue;
    t.requests++;
    const fFirst = final.findIndex((m) => m['role'] === 'assistant');
    const fLast = final.findLastIndex((m) => m['role'] === 'assistant');
    const core = [
      ...final.slice(0, fFirst === -1 ? final.length : fFirst),
      ...final
        .slice(fFirst === -1 ? final.length : fFirst, fLast === -1 ? 0 : fLast)
        .filter((m) => m['role'] === 'user'),
      ...(fLast === -1 ? [] : final.slice(fLast)),
    ];
    const coreT = core.reduce((n, m) => n + tokens(m), 0);
    const coreJson = JSON.stringify(core);
    // Earlier actions (the last assistant message before i is in the core).
    const last = msgs.slice(0, i).findLastIndex((m) => m['role'] === 'assistant');
    const costs: number[] = [];
    let checked = 0;
    for (let j = first; j < i; j++) {
      const m = msgs[j]!;
      if (m['role'] !== 'assistant') continue;
      const acts = chatActions(m);
      checked += acts.length;
      if (j === last) continue;
      const calls = Array.isArray(m['tool_calls']) ? (m['tool_calls'] as Obj[]) : [];
      if (calls.length > 0)
        for (const c of calls)
          costs.push(
            tokens({ role: 'assistant', content: '', tool_calls: [c] }) +
              tokens({ role: 'tool', tool_call_id: c['id'], content: RECEIPT }),
          );
      else for (const a of acts) costs.push(tokens(a) + 4);
    }
    const actT = costs.reduce((n, c) => n + c, 0);
    const room = W - R - coreT;
    costs.sort((a, b) => a - b);
    let fit = 0;
    let used = 0;
    for (const c of costs) {
      if (used + c > room) break;
      used += c;
      fit++;
    }
    t.ac += checked;
    t.av += checked - costs.length + fit;
    // What the answer uses from earlier outputs (as src/replay/sight.ts decides it).
    const answer = msgs[i]!;
    const other: string[] = [];
    const outputs: string[] = [];
    for (let j = 0; j < i; j++) {
      const m = msgs[j]!;
      if (m['role'] === 'tool') outputs.push(text(m));
      else {
        other.push(...stringsOf(m));
        if (m['role'] === 'assistant') for (const a of chatActions(m)) other.push(...actionValues(a));
      }
    }
    const otherJoined = other.join('\u0000');
    const isUsed = (x: string): boolean => !otherJoined.includes(x) && outputs.some((o) => o.includes(x));
    const { words, lines } = useCandidates(chatActions(answer).flatMap((a) => actionValues(a)));
    const shown = (x: string): boolean => coreJson.includes(JSON.stringify(x).slice(1, -1));
    const uLines = lines.filter(isUsed);
    const uWords = words.filter(isUsed);
    t.lc += uLines.length;
    t.wc += uWords.length;
    const needLines = uLines.filter((l) => !shown(l)).map((l) => ({ l, c: counter.count(l) + 1 }));
    needLines.sort((a, b) => a.c - b.c);
    let left = room - used;
    const keptLines: string[] = [];
    for (const n of needLines) {
      if (n.c > left) break;
      left -= n.c;
      keptLines.push(n.l);
    }
    t.lv += uLines.length - needLines.length + keptLines.length;
    const inKept = (x: string): boolean => keptLines.some((l) => l.includes(x)) || shown(x);
    const needWords = uWords.filter((x) => !inKept(x)).map((x) => ({ x, c: counter.count(x) + 1 }));
    needWords.sort((a, b) => a.c - b.c);
    let keptWords = 0;
    for (const n of needWords) {
      if (n.c > left) break;
      left -= n.c;
      keptWords++;
    }
    t.wv += uWords.length - needWords.length + keptWords;
    const useT = needLines.reduce((n, x) => n + x.c, 0);
    if (coreT + R > W) t.core++;
    if (coreT + actT + R > W) t.actions++;
    if (coreT + actT + useT + R > W) t.all++;
  }
  const pct = (a: number, b: number): number => (b === 0 ? 100 : Math.round((a / b) * 10000) / 100);
  console.log(
    JSON.stringify({
      id: s.id.split('/').at(-1)!.slice(0, 40),
      requests: t.requests,
      core_over: t.core,
      core_actions_over: t.actions,
      core_actions_used_over: t.all,
      best_actions_pct: pct(t.av, t.ac),
      best_lines_pct: pct(t.lv, t.lc),
      best_words_pct: pct(t.wv, t.wc),
      used_lines: t.lc,
      used_words: t.wc,
    }),
  );
  for (const key of Object.keys(totals) as (keyof typeof totals)[]) totals[key] += t[key];
}
const pct = (a: number, b: number): number => (b === 0 ? 100 : Math.round((a / b) * 10000) / 100);
console.log(
  JSON.stringify({
    all: true,
    W,
    R,
    requests: totals.requests,
    core_over: totals.core,
    core_actions_over: totals.actions,
    core_actions_used_over: totals.all,
    best_actions_pct: pct(totals.av, totals.ac),
    best_lines_pct: pct(totals.lv, totals.lc),
    best_words_pct: pct(totals.wv, totals.wc),
  }),
);
counter.dispose?.();
