/**
 * Budget counting backends by name (INCONTEXT_BACKEND). Built-ins: `vllm`, `tiktoken`,
 * `tokenizer-json`. Registering a name twice or selecting a missing one is a startup error.
 */
import type { Config } from '../config/types.js';
import { ConfigError } from '../errors.js';
import { definedFields } from '../options.js';
import { counterForModel, createTokenizerJsonCounter } from '../measure/index.js';
import type { TokenCounter } from '../measure/types.js';
import { budgetCounterFrom, type BudgetCounter } from './counter.js';
import { createVllmCounter } from './vllm.js';

/** What a backend factory gets: Config's tokenizer settings, plus what the route knows. */
export interface BackendSettings
  extends
    Partial<Pick<Config['incontext'], 'tokenizerUrl' | 'tokenizerTimeoutSeconds' | 'tokenizerUserAgent'>>,
    Partial<Pick<Config, 'tokenizerJson' | 'tiktokenEncoding'>> {
  /** The route's context window (checked against vLLM's max_model_len). */
  readonly contextLength?: number;
  /** The route's model (picks the tiktoken encoding). */
  readonly model?: string;
}

/**
 * Builds a counter. It should validate its settings (throwing ConfigError) and open nothing until
 * the first count, because the budget operator calls it once at build time to validate and once
 * per subscription to get a counter of its own.
 */
export type BudgetCounterFactory = (settings: BackendSettings) => BudgetCounter;

/** Budget counter factories by backend name (the values of INCONTEXT_BACKEND). */
export interface CounterRegistry {
  register(name: string, factory: BudgetCounterFactory): void;
  /** The factory for `name`; ConfigError naming INCONTEXT_BACKEND when it is missing. */
  factory(name: string): BudgetCounterFactory;
  create(name: string, settings: BackendSettings): BudgetCounter;
  names(): string[];
}

const NAME = /^[a-z0-9][a-z0-9_.-]{0,63}$/;

const builtins: Readonly<Record<string, BudgetCounterFactory>> = {
  vllm: (s) => {
    if (s.tokenizerUrl === undefined || s.tokenizerUrl === '')
      throw new ConfigError('INCONTEXT_BACKEND=vllm requires INCONTEXT_TOKENIZER_URL (the /tokenize endpoint)');
    const { tokenizerTimeoutSeconds: timeoutSeconds, tokenizerUserAgent: userAgent, contextLength } = s;
    return createVllmCounter({ url: s.tokenizerUrl, ...definedFields({ timeoutSeconds, userAgent, contextLength }) });
  },
  tiktoken: (s) =>
    lazy(() => counterForModel(s.model, s.tiktokenEncoding !== undefined ? { encoding: s.tiktokenEncoding } : {})),
  'tokenizer-json': (s) => {
    const path = s.tokenizerJson;
    if (path === undefined || path === '')
      throw new ConfigError(
        'INCONTEXT_BACKEND=tokenizer-json requires TOKEN_TERMINATOR_TOKENIZER_JSON (a tokenizer.json path)',
      );
    return lazy(() => createTokenizerJsonCounter(path), 'tokenizer-json');
  },
};

/** A TokenCounter-backed budget counter created on first use (encoders cost ~0.2 s and MBs). */
function lazy(make: () => TokenCounter, label?: string): BudgetCounter {
  let inner: { counter: TokenCounter; budget: BudgetCounter } | undefined;
  const get = (): BudgetCounter => {
    if (inner === undefined) {
      const counter = make();
      inner = { counter, budget: budgetCounterFrom(counter) };
    }
    return inner.budget;
  };
  return {
    get name() {
      return inner?.budget.name ?? label ?? 'tiktoken';
    },
    get exact() {
      return get().exact;
    },
    countRequest: (request, signal, context) => get().countRequest(request, signal, context),
    clearCache: () => inner?.budget.clearCache?.(),
    close: () => {
      inner?.counter.dispose?.();
      inner = undefined;
      return Promise.resolve();
    },
  };
}

/**
 * A registry; with `builtins` (default true) it starts with vllm, tiktoken and tokenizer-json.
 *
 * @example
 * const registry = createCounterRegistry({ builtins: false });
 * registry.register('my-tokenizer', myFactory);
 */
export function createCounterRegistry(options: { readonly builtins?: boolean } = {}): CounterRegistry {
  const factories = new Map<string, BudgetCounterFactory>(options.builtins === false ? [] : Object.entries(builtins));
  const registry: CounterRegistry = {
    register(name, factory) {
      if (!NAME.test(name))
        throw new ConfigError(
          `INCONTEXT_BACKEND: invalid backend name "${name}" (lower-case letters, digits, ".", "_", "-")`,
        );
      if (factories.has(name))
        throw new ConfigError(`INCONTEXT_BACKEND: backend "${name}" is registered more than once`);
      if (typeof factory !== 'function')
        throw new ConfigError(`INCONTEXT_BACKEND: backend "${name}" needs a factory function`);
      factories.set(name, factory);
    },
    factory(name) {
      const f = factories.get(name);
      if (f === undefined)
        throw new ConfigError(
          `INCONTEXT_BACKEND: no backend named "${name}" is registered (registered: ${[...factories.keys()].sort().join(', ')})`,
        );
      return f;
    },
    create: (name, settings) => registry.factory(name)(settings),
    names: () => [...factories.keys()].sort(),
  };
  return registry;
}

/**
 * The process-wide registry that `registerCounter` adds to and the budget operator uses by default.
 *
 * @example
 * defaultCounterRegistry.names(); // includes 'vllm', 'tiktoken' and 'tokenizer-json'
 */
export const defaultCounterRegistry: CounterRegistry = createCounterRegistry();

/**
 * Register a budget counting backend under a name INCONTEXT_BACKEND can select.
 *
 * @example
 * registerCounter('acme', () => ({ name: 'acme', exact: true, countRequest: async (req) => acme.count(req) }));
 */
export function registerCounter(name: string, factory: BudgetCounterFactory): void {
  defaultCounterRegistry.register(name, factory);
}
