import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { editWindowView, readNumberedWindow, renumber } from '../../src/compact/edit-window.js';

const PATH = '/repo/src/Main.java';

function sweWindow(rows: readonly string[], start: number, total: number): string {
  const body = rows.map((r, i) => `${start + i}:${r}`);
  return [
    `[File: ${PATH} (${total} lines total)]`,
    `(${start - 1} more lines above)`,
    ...body,
    `(${total - start - rows.length + 1} more lines below)`,
    'File updated. Please review the changes and make sure they are correct.',
  ].join('\n');
}

/** The rows a gap line of {@link editWindowView} names, if `line` is one. */
function gapSpan(line: string): { first: number; last: number; shift: number } | undefined {
  const same = /^\[lines? (\d+)(?:-(\d+))? unchanged: as shown in .+\]$/.exec(line);
  if (same !== null) return { first: Number(same[1]), last: Number(same[2] ?? same[1]), shift: 0 };
  const moved = /^\[lines? (\d+)(?:-(\d+))?: lines? \d+(?:-\d+)? as shown in .+, now (\d+) (lower|higher)\]$/.exec(
    line,
  );
  if (moved === null) return undefined;
  const d = Number(moved[3]) * (moved[4] === 'lower' ? 1 : -1);
  return { first: Number(moved[1]), last: Number(moved[2] ?? moved[1]), shift: d };
}

/** The result `view` stands for, its gaps filled from the rows `earlier` shows. */
function restore(view: string, earlier: string): string {
  const rows = new Map<number, string>();
  const w = readNumberedWindow(earlier)!;
  w.lines.forEach((l, i) => {
    if (w.numbers[i] !== undefined) rows.set(w.numbers[i]!, l);
  });
  return view
    .split('\n')
    .flatMap((l) => {
      const gap = gapSpan(l);
      if (gap === undefined) return [l];
      const out: string[] = [];
      for (let n = gap.first; n <= gap.last; n++) out.push(renumber(rows.get(n - gap.shift)!, n));
      return out;
    })
    .join('\n');
}

const code = (n: number): string[] =>
  Array.from({ length: n }, (_, i) => `    int value${i} = compute(${i}); // row ${i}`);

describe('editWindowView', () => {
  it('keeps the edited rows with their numbers and names the rows an earlier view shows', () => {
    const before = code(40);
    const after = [
      ...before.slice(0, 20),
      '    if (listeners == null) {',
      '        listeners = new HashSet<>();',
      '    }',
      ...before.slice(20),
    ];
    const earlier = sweWindow(before, 101, 300);
    const result = sweWindow(after.slice(0, 40), 101, 303);
    const view = editWindowView(result, earlier, 'the read_file output of Main.java (call_2)')!;
    expect(view).toBeDefined();
    expect(view.length).toBeLessThan(result.length / 2);
    expect(view).toContain('121:    if (listeners == null) {');
    expect(view).toContain('122:        listeners = new HashSet<>();');
    expect(view).toContain('[lines 101-118 unchanged: as shown in the read_file output of Main.java (call_2)]');
    expect(view.split('\n')[0]).toBe(`[File: ${PATH} (303 lines total)]`);
    expect(view).toContain('File updated.');
    expect(view).toContain(
      '[lines 126-140: lines 123-137 as shown in the read_file output of Main.java (call_2), now 3 lower]',
    );
    expect(restore(view, earlier)).toBe(result);
  });

  it('reads the cat -n shape of OpenHands and Claude Code', () => {
    const cat = (rows: readonly string[]): string =>
      [`The file ${PATH} has been edited. Here's the result of running \`cat -n\` on a snippet of ${PATH}:`]
        .concat(rows.map((r, i) => `${String(i + 1).padStart(6)}\t${r}`))
        .join('\n');
    const before = code(30);
    const after = [...before];
    after[15] = '    int changed = 1;';
    const earlier = cat(before);
    const result = cat(after);
    const view = editWindowView(result, earlier, 'the earlier view')!;
    expect(view).toContain('    16\t    int changed = 1;');
    expect(restore(view, earlier)).toBe(result);
  });

  it('leaves a window of another file, or one with nothing to name, alone', () => {
    const earlier = sweWindow(code(20), 1, 20).replace(PATH, '/repo/Other.java');
    expect(editWindowView(sweWindow(code(20), 1, 20), earlier, 'x')).toBeUndefined();
    expect(editWindowView('no window here\n1:a\n2:b\n3:c', earlier, 'x')).toBeUndefined();
  });

  it('is smaller or undefined, shows every row the earlier view lacks, and restores exactly', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom('a', 'bb', '    int x = 1;', '', '}', '// comment'), { minLength: 3, maxLength: 60 }),
        fc.array(fc.constantFrom('a', 'bb', '    int x = 1;', '', '}', '// c2', 'new()'), {
          minLength: 3,
          maxLength: 60,
        }),
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 1, max: 50 }),
        (beforeRows, afterRows, s1, s2) => {
          const earlier = sweWindow(beforeRows, s1, 200);
          const result = sweWindow(afterRows, s2, 200);
          const view = editWindowView(result, earlier, 'the earlier view');
          if (view === undefined) return;
          expect(view.length).toBeLessThan(result.length);
          expect(restore(view, earlier)).toBe(result);
          const shown = new Set(earlier.split('\n'));
          for (const line of result.split('\n')) if (!shown.has(line)) expect(view.split('\n')).toContain(line);
        },
      ),
    );
  });
});
