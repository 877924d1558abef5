/**
 * Compiler and linter diagnostics (tsc, eslint, javac, mypy, ruff, generic `file:line:col: msg`):
 * one legend line per code with its distinct messages, one line per file listing codes and
 * positions. Unparsed lines (summaries such as "Found 56 errors") are kept.
 */
import { rangeTemplate } from './factor.js';
import { renderFaithful } from './faithful.js';
import { clipLine, lineShape, splitLines, stripAnsi } from './lines.js';
import type { FailureView } from './test-runners.js';

interface Diagnostic {
  /** The raw line it was read from. */
  readonly line: string;
  readonly file: string;
  readonly pos: string;
  readonly severity: string;
  readonly code: string;
  message: string;
}

const TSC = /^(.+?)\((\d+),(\d+)\): (error|warning|message) (TS\d+): (.*)$/;
const TSC_PRETTY = /^(.+?):(\d+):(\d+) - (error|warning) (TS\d+): (.*)$/;
const JAVAC = /^(.+?\.java):(\d+): (error|warning): (.*)$/;
const MYPY = /^(.+?\.pyi?):(\d+)(?::(\d+))?: (error|warning|note): (.*?)(?:\s{2}\[([\w-]+)\])?$/;
const RUFF = /^(.+?):(\d+):(\d+): ([A-Z]{1,4}\d{2,5}) (.*)$/;
const ESLINT_ROW = /^\s+(\d+):(\d+)\s+(error|warning)\s+(.+?)\s{2,}(\S+)$/;
const ESLINT_FILE = /^(\/|\.{0,2}\/?[\w@.-]+\/)\S*\.\w+$/;

/**
 * Parse and group; undefined when fewer than 3 diagnostics are found. With `failure`, the
 * diagnostic lines come first, verbatim, within their budget (around a head and tail of at most
 * `maxChars`), and only the ones that did not fit are grouped.
 */
export function compactDiagnostics(
  text: string,
  variantsPerCode = 3,
  failure?: FailureView,
  maxChars = 4000,
): string | undefined {
  const lines = splitLines(stripAnsi(text));
  const diags: Diagnostic[] = [];
  const other: string[] = [];
  let eslintFile: string | undefined;
  let last: Diagnostic | undefined;
  for (const line of lines) {
    let m: RegExpExecArray | null;
    if ((m = TSC.exec(line) ?? TSC_PRETTY.exec(line)) !== null) {
      last = { line, file: m[1]!, pos: `${m[2]}:${m[3]}`, severity: m[4]!, code: m[5]!, message: m[6]! };
    } else if ((m = JAVAC.exec(line)) !== null) {
      last = { line, file: m[1]!, pos: m[2]!, severity: m[3]!, code: '', message: m[4]! };
    } else if ((m = MYPY.exec(line)) !== null) {
      last = {
        line,
        file: m[1]!,
        pos: m[3] === undefined ? m[2]! : `${m[2]}:${m[3]}`,
        severity: m[4]!,
        code: m[6] ?? '',
        message: m[5]!,
      };
    } else if ((m = RUFF.exec(line)) !== null) {
      last = { line, file: m[1]!, pos: `${m[2]}:${m[3]}`, severity: 'error', code: m[4]!, message: m[5]! };
    } else if (eslintFile !== undefined && (m = ESLINT_ROW.exec(line)) !== null) {
      last = { line, file: eslintFile, pos: `${m[1]}:${m[2]}`, severity: m[3]!, code: m[5]!, message: m[4]! };
    } else {
      if (ESLINT_FILE.test(line)) eslintFile = line;
      else if (line.trim() === '') eslintFile = undefined;
      // javac explains a diagnostic on the following lines: keep the symbol, drop source and caret.
      const symbol = /^\s+symbol:\s+(.*)$/.exec(line);
      if (last !== undefined && last.code === '' && symbol !== null) last.message += ` (${symbol[1]!.trim()})`;
      else if (last === undefined || !/^\s/.test(line))
        if (!ESLINT_FILE.test(line) && line.trim() !== '') other.push(line);
      continue;
    }
    diags.push(last);
  }
  if (diags.length < 3) return undefined;
  if (failure === undefined || failure.flagged.length === 0) return render(diags, other, variantsPerCode);
  const body = renderFaithful(lines, failure.flagged, { maxChars, diagnosticChars: failure.diagnosticChars });
  const shown = new Set(splitLines(body));
  const rest = diags.filter((d) => !shown.has(d.line));
  const errors = diags.filter((d) => d.severity === 'error').length;
  const head = `[diagnostics: ${errors} errors, ${diags.length - errors} other in ${new Set(diags.map((d) => d.file)).size} files]`;
  if (rest.length === 0) return `${head}\n${body}`;
  return `${head}\n${body}\n${render(rest, [], variantsPerCode, 'not shown above')}`;
}

function render(
  diags: readonly Diagnostic[],
  other: readonly string[],
  variantsPerCode: number,
  label = 'diagnostics',
): string {
  const codeOf = (d: Diagnostic): string => d.code || lineShape(d.message.replace(/ \(.*\)$/, ''));
  const byCode = new Map<string, Map<string, string[]>>();
  const byFile = new Map<string, Map<string, string[]>>();
  const files = new Set<string>();
  for (const d of diags) {
    const code = codeOf(d);
    const variants = byCode.get(code) ?? new Map<string, string[]>();
    byCode.set(code, variants);
    const key = lineShape(d.message);
    variants.set(key, [...(variants.get(key) ?? []), d.message]);
    files.add(d.file);
    const perFile = byFile.get(d.file) ?? new Map<string, string[]>();
    byFile.set(d.file, perFile);
    const label = d.code === '' ? `#${[...byCode.keys()].indexOf(code) + 1}` : d.code;
    perFile.set(label, [...(perFile.get(label) ?? []), d.pos]);
  }
  const errors = diags.filter((d) => d.severity === 'error').length;
  const out = [`[${label}: ${errors} errors, ${diags.length - errors} other in ${files.size} files]`, 'codes:'];
  let index = 0;
  for (const [code, variants] of byCode) {
    index += 1;
    const total = [...variants.values()].reduce((n, v) => n + v.length, 0);
    // Messages that differ only in numbers (names like undefinedThing1…14) show their ranges.
    const shown = [...variants.values()]
      .slice(0, variantsPerCode)
      .map((v) => clipLine(rangeTemplate(v), 200) + (v.length > 1 ? ` \u00d7${v.length}` : ''));
    const more = variants.size > variantsPerCode ? ` | (+${variants.size - variantsPerCode} variants)` : '';
    const name = diags.some((d) => d.code === code) ? code : `#${index}`;
    out.push(`  ${name} ×${total}: ${shown.join(' | ')}${more}`);
  }
  out.push('by file:');
  for (const [file, codes] of byFile) {
    out.push(`  ${file}: ${[...codes].map(([c, pos]) => `${c} ${pos.join(',')}`).join('; ')}`);
  }
  out.push(...other.slice(0, 20).map((l) => clipLine(l, 300)));
  return out.join('\n');
}
