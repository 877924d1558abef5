/**
 * Line-level helpers shared by every compactor: ANSI stripping, Python-compatible line splitting,
 * "signal" detection and number-insensitive line shapes.
 */

// ESC [ parameter bytes (0x30–0x3F)* intermediate bytes (0x20–0x2F)* one final byte (0x40–0x7E).
const ANSI_CSI = /\u001b\[[\u0030-\u003f]*[\u0020-\u002f]*[\u0040-\u007e]/g;

/** Remove ANSI CSI sequences (colours, cursor moves) the way the reference does. */
export function stripAnsi(text: string): string {
  return text.includes('\u001b') ? text.replace(ANSI_CSI, '') : text;
}

// Python's str.splitlines() separators; \r\n counts as one.
const SPLITLINES = /\r\n|[\n\r\u000b\u000c\u001c\u001d\u001e\u0085\u2028\u2029]/;

/** Python `str.splitlines()` (no trailing empty line for a final terminator). */
export function splitLines(text: string): string[] {
  if (text === '') return [];
  const parts = text.split(SPLITLINES);
  if (parts.length > 1 && parts[parts.length - 1] === '') parts.pop();
  return parts;
}

/** Lines that must survive every compaction: errors, warnings, failures, panics, exit codes. */
export const SIGNAL_LINE =
  /\b(?:error|errors|err!|warn|warning|warnings|fail|failed|failure|failures|failing|fatal|panic|panicked|exception|traceback|denied|refused|segmentation fault|abort|aborted|assert(?:ion)?error|exit(?:ed)?(?: with)? (?:code|status))\b|^E\s{2,}|✗|×|✖|❯/i;

/** True when a line carries an error, warning, failure or exit status. */
export function isSignalLine(line: string): boolean {
  return SIGNAL_LINE.test(line);
}

const ERROR_LINE =
  /\b(?:error|errors|err!|fail|failed|failure|failures|fatal|panic|panicked|exception|traceback|segmentation fault|aborted|assert(?:ion)?error)\b|^E\s{2,}|✗|✖/i;

/** The most important signal lines: errors and failures (not warnings). */
export function isErrorLine(line: string): boolean {
  return ERROR_LINE.test(line);
}

/** A line's shape: every run of decimal digits replaced by `#` (lines differing only in numbers share it). */
export function lineShape(line: string): string {
  return line.replace(/\d+/g, '#');
}

/** The decimal-digit runs of a line, in order. */
export function lineNumbers(line: string): string[] {
  return line.match(/\d+/g) ?? [];
}

/** Cut a single over-long line in the middle, on code points, with a visible marker. */
export function clipLine(line: string, maxChars: number): string {
  if (line.length <= maxChars) return line;
  const points = Array.from(line);
  if (points.length <= maxChars) return line;
  const keep = Math.max(2, maxChars - 24);
  const head = Math.ceil(keep * 0.6);
  const tail = keep - head;
  const omitted = points.length - head - tail;
  return `${points.slice(0, head).join('')} … [${omitted} chars] … ${points.slice(points.length - tail).join('')}`;
}
