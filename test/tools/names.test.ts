import { describe, expect, it } from 'vitest';
import { commandOf } from '../../src/tools/command.js';
import { canonicalToolName } from '../../src/tools/names.js';

describe('tool names of the agents people run (unit)', () => {
  it.each([
    ['Bash', 'terminal'], // Claude Code
    ['Read', 'read_file'],
    ['Grep', 'search_files'],
    ['Glob', 'search_files'],
    ['exec_command', 'terminal'], // Codex CLI
    ['shell', 'terminal'],
    ['apply_patch', 'terminal'],
    ['bash', 'terminal'], // opencode, SWE-agent, mini-swe-agent
    ['read', 'read_file'],
    ['grep', 'search_files'],
    ['execute_bash', 'terminal'], // OpenHands
    ['str_replace_editor', 'read_file'],
    ['find_file', 'search_files'], // SWE-agent
    ['search_dir', 'search_files'],
    ['search_file', 'search_files'],
  ])('recognises %s as %s without configuration', (name, canonical) => {
    expect(canonicalToolName(name)).toBe(canonical);
  });

  it('a user map overrides a default and unknown names stay unknown', () => {
    expect(canonicalToolName('Read', { Read: 'search_files' })).toBe('search_files');
    expect(canonicalToolName('web_fetch')).toBeUndefined();
  });
});

describe('commandOf (unit)', () => {
  it('reads `command` or `cmd`, a string or a Codex argv', () => {
    expect(commandOf({ command: 'npm test' })).toBe('npm test');
    expect(commandOf({ cmd: 'pytest -x' })).toBe('pytest -x');
    expect(commandOf({ command: ['bash', '-lc', 'pytest -x'] })).toBe('pytest -x');
    expect(commandOf({ command: ['/bin/sh', '-c', 'make'] })).toBe('make');
    expect(commandOf({ command: ['git', 'status'] })).toBe('git status');
    expect(commandOf({ command: ['bash', '-lc', ' '] })).toBeUndefined();
    expect(commandOf({ command: [1, 2] })).toBeUndefined();
    expect(commandOf({ command: [] })).toBeUndefined();
    expect(commandOf({})).toBeUndefined();
  });
});
