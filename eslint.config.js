// Lint: typescript-eslint's recommended rules (syntax-only, so a run takes seconds), plus the
// project's own: no console in the library core (hosts print through their own writers), and
// unused code is an error. Control characters in regular expressions are allowed: stripping ANSI
// escapes, NUL and the other C0 codes is what several compactors and validators are for. Formatting is prettier's job (.prettierrc.json), not the linter's.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.pack-check/**', 'test-results/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      ecmaVersion: 2023,
      sourceType: 'module',
      globals: { console: 'readonly', process: 'readonly', URL: 'readonly' },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
      '@typescript-eslint/consistent-type-imports': [
        'error',
        { fixStyle: 'inline-type-imports', disallowTypeAnnotations: false },
      ],
      'no-control-regex': 'off',
      'no-constant-condition': ['error', { checkLoops: false }],
      eqeqeq: ['error', 'always'],
    },
  },
  {
    // Tests poke at untyped results (parsed JSON, framework internals) on purpose.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    files: ['src/**/*.ts', 'operators/**/*.ts'],
    ignores: ['src/cli/**', 'src/replay/**', 'src/eval/**', 'src/report/**'],
    rules: { 'no-console': 'error' },
  },
);
