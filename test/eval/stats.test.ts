import { describe, expect, it } from 'vitest';
import {
  analyse,
  exactNonInferiorityP,
  extractAnswer,
  grade,
  makeTask,
  makeTasks,
  mcnemarHarmP,
  tangoZ,
  TASK_FAMILIES,
} from '../../src/eval/index.js';

const pairs = (bothRight: number, onlyOff: number, onlyBalanced: number, bothWrong = 0): [boolean, boolean][] => [
  ...Array.from({ length: bothRight }, () => [true, true] as [boolean, boolean]),
  ...Array.from({ length: onlyOff }, () => [true, false] as [boolean, boolean]),
  ...Array.from({ length: onlyBalanced }, () => [false, true] as [boolean, boolean]),
  ...Array.from({ length: bothWrong }, () => [false, false] as [boolean, boolean]),
];

describe('eval statistics', () => {
  it('exact McNemar harm p is the binomial tail on the discordant pairs', () => {
    expect(mcnemarHarmP(5, 0)).toBeCloseTo(1 / 32, 12);
    expect(mcnemarHarmP(0, 0)).toBe(1);
    expect(mcnemarHarmP(3, 3)).toBeCloseTo(42 / 64, 12); // P(X ≥ 3), X ~ Bin(6, 1/2)
  });

  it('Tango z with no discordant pairs is −sqrt(nδ / (1 − δ))', () => {
    expect(tangoZ(0, 0, 72, 0.1)).toBeCloseTo(-Math.sqrt((72 * 0.1) / 0.9), 12);
    expect(tangoZ(10, 0, 72, 0.1)).toBeGreaterThan(0);
  });

  it('the exact non-inferiority p grows with harm and shrinks with help', () => {
    const p = (b: number, c: number) => exactNonInferiorityP(b, c, 72, 0.1);
    expect(p(0, 0)).toBeLessThan(p(1, 0));
    expect(p(1, 0)).toBeLessThan(p(3, 0));
    expect(p(3, 2)).toBeLessThan(p(3, 0));
    // Exact is at least as conservative as the normal approximation here (Φ(−2.828) = 0.0023).
    expect(p(0, 0)).toBeGreaterThanOrEqual(0.0023);
    expect(p(0, 0)).toBeLessThan(0.005);
    expect(() => exactNonInferiorityP(0, 0, 72, 0)).toThrow(RangeError);
  });

  it('decides by the precommitted rule at each look', () => {
    expect(analyse(pairs(72, 0, 0), 0.1, true).verdict).toBe('non-inferior');
    expect(analyse(pairs(36, 0, 0), 0.1, false).verdict).toBe('withheld');
    expect(analyse(pairs(30, 6, 0), 0.1, false).verdict).toBe('inferior'); // p = 1/64
    expect(analyse(pairs(31, 5, 0), 0.1, false).verdict).toBe('withheld'); // p = 1/32 > 0.025
    expect(analyse(pairs(66, 3, 0, 3), 0.1, true).verdict).toBe('inconclusive'); // exact p ≈ 0.062
    expect(analyse(pairs(58, 5, 5, 4), 0.1, true).verdict).toBe('non-inferior'); // symmetric noise does not count as harm
  });
});

describe('eval tasks and grading', () => {
  it('rotates the four families and plants a fact its evidence contains', () => {
    const tasks = makeTasks(5, 8);
    expect(tasks.map((t) => t.family)).toEqual([...TASK_FAMILIES, ...TASK_FAMILIES]);
    for (const t of tasks) {
      expect(t.evidence.length).toBeGreaterThan(8000);
      for (const n of t.needs) expect(t.evidence).toContain(n);
      expect(t.evidence).toContain(t.family === 'count' ? `[${t.question.match(/component (\S+) /)![1]}]` : t.expected);
    }
  });

  it('a task depends only on (seed, index)', () => {
    expect(makeTask(9, 5)).toEqual(makeTasks(9, 6)[5]);
    expect(makeTask(9, 5)).not.toEqual(makeTask(10, 5));
  });

  it('grades the last ANSWER line exactly, ignoring case, quotes and a full stop', () => {
    const t = makeTask(1, 2);
    expect(grade(t, `thinking…\nANSWER: \`${t.expected.toUpperCase()}\`.`)).toBe(true);
    expect(grade(t, `ANSWER: ${t.expected}\nANSWER: 0.0.0`)).toBe(false);
    expect(grade(t, t.expected)).toBe(false);
    expect(extractAnswer('answer:  **42** ')).toBe('42');
    expect(extractAnswer('no answer here')).toBeUndefined();
  });
});
