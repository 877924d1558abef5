import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES } from '../src/config/index.js';
import { createTerminator, createTiktokenCounter, type Terminator } from '../src/index.js';
import { recoveryToolJson } from '../src/recovery/formats.js';
import { readSessions, replaySessions, summaryLine } from '../src/replay/index.js';
import { DEFAULT_TOOL_NAMES } from '../src/tools/names.js';

const read = (path: string): string => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
const readme = read('README.md');
/** The reference pages the README moved its details to: a fact may live in either. */
const docs = ['docs/how-it-works.md', 'docs/configuration.md', 'docs/integrations.md'].map(read).join('\n');
const int = (n: number): string => n.toLocaleString('en-US');
const block = (lang: string, after: string): string => {
  const from = readme.indexOf(after);
  expect(from, after).toBeGreaterThanOrEqual(0);
  return new RegExp(`^\`\`\`${lang}\\n([\\s\\S]*?)^\`\`\`$`, 'm').exec(readme.slice(from))?.[1] ?? '';
};

describe('README.md', () => {
  it('reads in ten minutes: at most 300 lines, and no word of ours a newcomer cannot know', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(300);
    expect(readme).not.toMatch(/\bissue #?\d+/i);
    expect(readme).not.toMatch(/\bthe seed\b/i);
    expect(readme).not.toMatch(/incontext/i);
    expect(readme).not.toMatch(/corpus [A-Z]\b/);
  });

  it('links only to files that exist (the tarball check needs them packed too)', () => {
    const links = [...readme.matchAll(/\]\(([^)\s#]+)(?:#[^)]*)?\)/g)].map((m) => m[1] ?? '');
    expect(links.length).toBeGreaterThan(5);
    for (const href of links.filter((h) => !/^[a-z]+:/i.test(h)))
      expect(existsSync(new URL(`../${href}`, import.meta.url)), href).toBe(true);
  });

  it('names every tool name recognised without configuration, and how to map others (here or in docs)', () => {
    for (const name of Object.keys(DEFAULT_TOOL_NAMES)) expect(docs, name).toContain(`\`${name}\``);
    expect(readme).toContain('`TOKEN_TERMINATOR_TOOL_NAMES`');
  });

  it('documents the output-cap and model-limit switches', () => {
    for (const name of [
      'TOKEN_TERMINATOR_OUTPUT_CAP',
      'TOKEN_TERMINATOR_MODEL_LIMITS',
      'TOKEN_TERMINATOR_TOKEN_BUDGET',
    ]) {
      expect(CONFIG_VARIABLES).toContain(name);
      expect(readme).toContain(`\`${name}\``);
      expect(docs).toContain(`\`${name}\``);
    }
  });

  it('says what /healthz answers as the proxy answers it (test/integration/proxy.test.ts)', () => {
    const gateway = read('docs/gateway.md');
    expect(gateway).toContain('`/healthz`, which answers `{"status":"ok"}`');
    expect(gateway).not.toMatch(/healthz`?, which says nothing but `ok`/);
  });

  it('keeps the quick start at exactly two commands', () => {
    const quick = /## Quick start\n\n```bash\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
    expect(quick.trim().split('\n')).toHaveLength(2);
  });

  it('tells a CommonJS project (npm init -y) what to set, in the command pack-check runs', () => {
    expect(readme.slice(0, 1500)).toMatch(/`npm init -y && npm pkg set type=module`/);
  });

  it('has self-contained ts snippets importing the package by name (compiled against the tarball in CI)', () => {
    const blocks = [readme, read('docs/integrations.md')].flatMap((text) =>
      [...text.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1] ?? ''),
    );
    expect(blocks.length).toBeGreaterThanOrEqual(5);
    for (const code of blocks) {
      expect(code).toMatch(/from 'token-terminator(\/[a-z/-]+)?'/);
      expect(code).not.toContain('../src');
    }
  });

  it('quotes the summary line npm start ends with, as a replay of the sample prints it', async () => {
    const start = JSON.parse(read('package.json')) as { scripts: { start: string } };
    expect(start.scripts.start).toBe('tsx src/cli/main.ts replay examples/sessions/sample.jsonl');
    const figures = await replaySessions(await readSessions('examples/sessions/sample.jsonl', Infinity), {});
    const line = summaryLine(figures);
    expect(block('text', '## Quick start').trim(), 'run `npm run report:png` and paste the line it prints').toBe(line);
    const table = readme.slice(readme.indexOf('## What it saves'), readme.indexOf('## Checking savings'));
    for (const figure of [
      `${int(figures.raw_tokens)} | ${int(figures.final_tokens)} (${figures.reduction_pct.toFixed(2)} % fewer)`,
      `**${figures.effective_cost_with_recoveries_ratio.toFixed(4)}**`,
      `(Anthropic-style: ${figures.effective_cost_with_recoveries_ratio_anthropic.toFixed(4)})`,
      `${figures.effective_cost_ratio_openai.toFixed(4)} (Anthropic-style: ${figures.effective_cost_ratio_anthropic.toFixed(4)})`,
      `${figures.recovered_exact}/${figures.receipts}`,
      `${figures.fidelity.use_lines_visible}/${figures.fidelity.use_lines}, ${figures.fidelity.use_words_visible}/${figures.fidelity.use_words}`,
      `(${figures.requests} requests`,
    ])
      expect(table, figure).toContain(figure);
  }, 60_000);
});

describe('README.md: what the model sees, and what the recovery tool costs', () => {
  let dir: string;
  let terminator: Terminator;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tt-readme-'));
    terminator = await createTerminator({ overrides: { dbPath: join(dir, 'v.sqlite3') } });
  });
  afterAll(async () => {
    await terminator.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const counter = createTiktokenCounter();

  it('shows an excerpt of the view the model really gets of the 31 kB pytest run, with its true sizes', async () => {
    const pytest = read('test/fixtures/readme-setups/pytest-30k.txt');
    const step = await terminator.reduceToolResult(
      { callId: 'call_1', name: 'bash', args: { command: 'pytest' }, content: pytest },
      { sessionId: 'readme' },
    );
    const view = String(step.value.content);
    const section = readme.slice(readme.indexOf('## What the model sees'), readme.indexOf('## Use it'));
    expect(section).toContain(`${int(pytest.length)} characters (${int(counter.count(pytest))} tokens)`);
    expect(section).toContain(`${int(view.length)} characters (${int(counter.count(view))} tokens)`);
    const before = block('text', '## What the model sees');
    for (const line of before.split('\n').filter((l) => l !== '' && !l.startsWith('…'))) expect(pytest).toContain(line);
    const after = block('text', 'An excerpt:');
    // The receipt's id is the content's digest, so the whole view is quoted exactly, line by line.
    for (const line of after.split('\n').filter((l) => l !== '' && l !== '…')) expect(view, line).toContain(line);
  });

  it('states the cost of offering the recovery tool as its definition measures', () => {
    const size = (format: 'chat' | 'anthropic'): string => {
      const json = JSON.stringify(recoveryToolJson(terminator.recoveryTool, format));
      return `${int(json.length)}`;
    };
    const tokens = (format: 'chat' | 'anthropic'): number =>
      counter.count(JSON.stringify(recoveryToolJson(terminator.recoveryTool, format)));
    expect(readme).toContain(`costs ${size('chat')} characters (${tokens('chat')} o200k tokens)`);
    expect(readme).toContain(`(${size('anthropic')} / ${tokens('anthropic')} for Anthropic Messages)`);
  });
});
