/**
 * Wrap an official `openai` client (or anything shaped like it) so `chat.completions.create` and
 * `responses.create` send their body through the request pipeline first. Everything else on the
 * client is left untouched; the client object itself is never modified.
 */
import type { Terminator } from '../../src/runtime/types.js';
import { wrapCreate, type ClientWrapOptions, type CreateFn } from './wrap-create.js';
import { override } from '../shared/override.js';

/** The structural slice of the OpenAI client the wrapper touches. */
export interface OpenAILike {
  readonly chat: { readonly completions: { create: CreateFn } };
  readonly responses?: { create: CreateFn };
}

/**
 * A view of `client` whose `chat.completions.create` and `responses.create` compile each request
 * (Chat Completions cap field `max_completion_tokens`, Responses `max_output_tokens` unless the
 * body already uses another) and retry once on a provider output-cap error.
 *
 * @example
 * const openai = wrapOpenAI(new OpenAI(), terminator, { sessionId: 'run-42', route: { contextWindow: 128_000 } });
 * const completion = await openai.chat.completions.create({ model: 'gpt-4o', messages });
 */
export function wrapOpenAI<C extends OpenAILike>(
  client: C,
  terminator: Terminator,
  options: ClientWrapOptions = {},
): C {
  const completions = wrapCreate(client.chat.completions, terminator, 'chat', options);
  const withChat = override(client, 'chat', override(client.chat, 'completions', completions));
  if (client.responses === undefined) return withChat;
  return override(withChat, 'responses', wrapCreate(client.responses, terminator, 'responses', options));
}
