/** What each wire format's requests are routed under, and the output-cap field a wrapper sets when the body uses none. */
import type { RecoveryWireFormat } from '../../src/recovery/formats.js';
import type { Route } from '../../src/step.js';
import type { OutputCapField } from './functions.js';

export const WIRE = {
  chat: { route: { provider: 'openai', endpoint: '/v1/chat/completions' }, capField: 'max_completion_tokens' },
  responses: { route: { provider: 'openai', endpoint: '/v1/responses' }, capField: 'max_output_tokens' },
  anthropic: { route: { provider: 'anthropic', endpoint: '/v1/messages' }, capField: 'max_tokens' },
} as const satisfies Record<RecoveryWireFormat, { route: Route; capField: OutputCapField }>;
