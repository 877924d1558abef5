/**
 * One rule for bad build-time options across every operator: a ConfigError, thrown when the
 * operator is built, whose message starts with the API and names the option (`api: options.x`).
 */
import { afterAll, describe, expect } from 'vitest';
import { fc, it, test } from '@fast-check/vitest';
import {
  capOutputBudget,
  collapseDuplicates,
  compileRequest,
  compressToolResult,
  deltaRepeatedOutput,
  rewriteTerminalCommand,
  routeSkills,
} from '../../operators/index.js';
import { ConfigError } from '../../src/errors.js';
import { createVault } from '../../src/vault/index.js';

const vault = await createVault({ path: ':memory:' });
afterAll(() => vault.close());

/** Each operator's integer options with their lower bound (the upper bound where there is one). */
const INT_OPTIONS: ReadonlyArray<{
  api: string;
  build: (o: Record<string, unknown>) => unknown;
  name: string;
  min: number;
  max?: number;
}> = [
  { api: 'collapseDuplicates', build: (o) => collapseDuplicates({ vault, ...o }), name: 'minArtifactChars', min: 1 },
  { api: 'collapseDuplicates', build: (o) => collapseDuplicates({ vault, ...o }), name: 'inlineViewChars', min: 200 },
  { api: 'compileRequest', build: (o) => compileRequest({ vault, ...o }), name: 'minVaultChars', min: 100 },
  { api: 'compileRequest', build: (o) => compileRequest({ vault, ...o }), name: 'inlineLeases', min: 1, max: 100 },
  { api: 'routeSkills', build: (o) => routeSkills(o), name: 'minCatalogSkills', min: 1 },
  { api: 'compressToolResult', build: (o) => compressToolResult({ vault, ...o }), name: 'terminalMaxChars', min: 200 },
  { api: 'compressToolResult', build: (o) => compressToolResult({ vault, ...o }), name: 'nativeMinChars', min: 1000 },
  { api: 'deltaRepeatedOutput', build: (o) => deltaRepeatedOutput({ vault, ...o }), name: 'minChars', min: 1 },
  { api: 'rewriteTerminalCommand', build: (o) => rewriteTerminalCommand(o), name: 'timeoutMs', min: 50 },
];

function thrown(build: () => unknown): unknown {
  try {
    build();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('bad operator options', () => {
  it.each(INT_OPTIONS)(
    '$api: options.$name out of range or not an integer is a ConfigError naming it',
    ({ api, build, name, min, max }) => {
      const bad = [min - 1, min + 0.5, Number.NaN, ...(max === undefined ? [] : [max + 1])];
      for (const value of bad) {
        const error = thrown(() => build({ [name]: value }));
        expect(error).toBeInstanceOf(ConfigError);
        expect((error as Error).message.startsWith(`${api}: options.${name} must be an integer`)).toBe(true);
      }
      expect(thrown(() => build({ [name]: min }))).toBeUndefined();
    },
  );

  test.prop([
    fc.constantFrom(...INT_OPTIONS),
    fc.oneof(fc.integer({ min: -1_000_000, max: -1 }), fc.double({ noInteger: true }), fc.string()),
  ])('any non-integer or negative value is rejected the same way', ({ api, build, name }, value) => {
    const error = thrown(() => build({ [name]: value }));
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toContain(`${api}: options.${name} `);
  });

  it('a missing vault, an unknown choice and a broken rule between options say which option', () => {
    const cases: Array<[() => unknown, string]> = [
      [() => collapseDuplicates({} as never), 'collapseDuplicates: options.vault is required'],
      [() => compileRequest(undefined as never), 'compileRequest: options.vault is required'],
      [() => compressToolResult({ vault: {} } as never), 'compressToolResult: options.vault is required'],
      [
        () => deltaRepeatedOutput({ vault, scope: 'global' as never }),
        'deltaRepeatedOutput: options.scope must be one of session, workspace',
      ],
      [
        () => compressToolResult({ vault, nativeStrategy: 'zip' as never }),
        'compressToolResult: options.nativeStrategy must be one of auto, reference, lines',
      ],
      [() => rewriteTerminalCommand({ mode: 'fast' as never }), 'rewriteTerminalCommand: options.mode must be one of'],
      [
        () => rewriteTerminalCommand({ exclude: 'git push' as never }),
        'rewriteTerminalCommand: options.exclude must be an array of strings',
      ],
      [
        () => routeSkills({ minScore: Number.POSITIVE_INFINITY }),
        'routeSkills: options.minScore must be a finite number',
      ],
      [
        () => routeSkills({ delimiters: { open: '', close: 'x' } }),
        'routeSkills: options.delimiters must be non-empty',
      ],
      [
        () => compileRequest({ vault, inlineRecentTurns: 3, collapseAfterTurns: 2 }),
        'compileRequest: options.collapseAfterTurns must be 0 or ≥ options.inlineRecentTurns',
      ],
      [() => collapseDuplicates({ vault, observations: '(' }), 'collapseDuplicates: options.observations must be'],
      [() => compressToolResult({ vault, toolNames: { a: 'b' } as never }), 'compressToolResult: options.toolNames'],
    ];
    for (const [build, message] of cases) {
      const error = thrown(build);
      expect(error, message).toBeInstanceOf(ConfigError);
      expect((error as Error).message.startsWith(message), `${(error as Error).message} ≠ ${message}`).toBe(true);
    }
    // The output-budget stage validates through the config's own rules: a ConfigError too.
    expect(thrown(() => capOutputBudget({ backend: 'nope' }))).toBeInstanceOf(ConfigError);
  });
});
