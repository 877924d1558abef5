/**
 * Wrap an Anthropic-style client so `messages.create` sends its body through the request pipeline
 * first (cap field `max_tokens`, which the Messages API requires). Typed structurally: the
 * `@anthropic-ai/sdk` client fits, and so does any object with the same method.
 */
import type { Terminator } from '../../src/runtime/types.js';
import { override } from '../shared/override.js';
import { wrapCreate, type ClientWrapOptions, type CreateFn } from './wrap-create.js';

/** The structural slice of an Anthropic client the wrapper touches. */
export interface AnthropicLike {
  readonly messages: { create: CreateFn };
}

/**
 * A view of `client` whose `messages.create` compiles each request and retries once on a provider
 * output-cap error.
 *
 * @example
 * const anthropic = wrapAnthropic(new Anthropic(), terminator, { sessionId: 'run-42', route: { contextWindow: 200_000 } });
 * const message = await anthropic.messages.create({ model, max_tokens: 4096, messages });
 */
export function wrapAnthropic<C extends AnthropicLike>(
  client: C,
  terminator: Terminator,
  options: ClientWrapOptions = {},
): C {
  return override(client, 'messages', wrapCreate(client.messages, terminator, 'anthropic', options));
}
