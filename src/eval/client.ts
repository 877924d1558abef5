/**
 * The harness's view of an OpenAI-compatible endpoint: POST `<base>/chat/completions`, read the
 * first choice, the usage and the serving identity (model, system_fingerprint). No SDK: any server
 * that speaks the Chat Completions wire format works (vLLM, llama.cpp, Ollama, a gateway).
 */
import { TokenTerminatorError } from '../errors.js';

/** The endpoint answered with an error or something that is not a chat completion. */
export class EvalProviderError extends TokenTerminatorError {
  constructor(message: string) {
    super('E_EVAL_PROVIDER', message);
  }
}

/** The serving model changed during the run: the pairs would compare two models. */
export class EvalDriftError extends TokenTerminatorError {
  constructor(message: string) {
    super('E_EVAL_DRIFT', message);
  }
}

export interface ChatMessage {
  role: string;
  content?: string | null;
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
}

export interface ChatResult {
  readonly message: ChatMessage;
  readonly identity: Identity;
  readonly promptTokens: number | undefined;
  readonly completionTokens: number | undefined;
}

/** What identifies the serving model: compared across every response of a run. */
export interface Identity {
  readonly model: string | null;
  readonly system_fingerprint: string | null;
}

export interface ClientOptions {
  readonly baseUrl: string;
  readonly apiKey?: string;
  /** Abort one request after this long (a hung endpoint must not hang the run). Default: 120000. */
  readonly timeoutMs?: number;
}

/** One chat completion. */
export async function chatCompletion(
  body: Readonly<Record<string, unknown>>,
  options: ClientOptions,
): Promise<ChatResult> {
  const url = `${options.baseUrl.replace(/\/+$/, '')}/chat/completions`;
  // A connection the server closed while idle (keep-alive) fails before any answer: retried, as
  // the SDKs do. An HTTP error or a timeout is never retried.
  let res: Response | undefined;
  let lastError: unknown;
  for (let attempt = 0; attempt < 3 && res === undefined; attempt++) {
    try {
      res = await fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(options.apiKey === undefined ? {} : { authorization: `Bearer ${options.apiKey}` }),
        },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(options.timeoutMs ?? 120_000),
      });
    } catch (error) {
      lastError = error;
      if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')) break;
    }
  }
  if (res === undefined)
    throw new EvalProviderError(
      `cannot reach ${redact(url)}: ${lastError instanceof Error ? lastError.message : String(lastError)}`,
    );
  const text = await res.text();
  if (!res.ok) throw new EvalProviderError(`HTTP ${res.status} from ${redact(url)}: ${errorMessage(text)}`);
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new EvalProviderError(`${redact(url)} did not answer JSON`);
  }
  const choice = Array.isArray(json['choices'])
    ? (json['choices'][0] as Record<string, unknown> | undefined)
    : undefined;
  const message = choice?.['message'];
  if (typeof message !== 'object' || message === null)
    throw new EvalProviderError(`${redact(url)} answered without choices[0].message`);
  const usage = (json['usage'] ?? {}) as Record<string, unknown>;
  return {
    message: message as ChatMessage,
    identity: { model: str(json['model']), system_fingerprint: str(json['system_fingerprint']) },
    promptTokens: typeof usage['prompt_tokens'] === 'number' ? usage['prompt_tokens'] : undefined,
    completionTokens: typeof usage['completion_tokens'] === 'number' ? usage['completion_tokens'] : undefined,
  };
}

/** Remembers the first response's identity and rejects any later one that differs. */
export class DriftGuard {
  #first: Identity | undefined;

  /** `expected`: the identity a resumed run recorded; the first response must match it too. */
  constructor(expected?: Identity) {
    this.#first = expected;
  }

  get identity(): Identity | undefined {
    return this.#first;
  }

  check(identity: Identity, where: string): void {
    if (this.#first === undefined) {
      this.#first = identity;
      return;
    }
    for (const key of ['model', 'system_fingerprint'] as const) {
      if (identity[key] !== this.#first[key])
        throw new EvalDriftError(
          `provider drift at ${where}: ${key} changed from ${JSON.stringify(this.#first[key])} to ${JSON.stringify(identity[key])}; the run is aborted because its pairs would compare different models`,
        );
    }
  }
}

/** The URL without credentials (user:password@ or query), safe to print and record. */
export function redact(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(invalid url)';
  }
}

function str(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

function errorMessage(text: string): string {
  try {
    const j = JSON.parse(text) as { error?: { message?: unknown } | string };
    const m = typeof j.error === 'string' ? j.error : j.error?.message;
    if (typeof m === 'string') return m.slice(0, 300);
  } catch {
    // not JSON: fall through to the raw start of the body
  }
  return text.slice(0, 300);
}
