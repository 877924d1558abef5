/**
 * The HTTP gateway: OpenAI (Chat Completions, Responses) and Anthropic (Messages) compatible, so
 * an agent that cannot be edited gets the pipeline by changing its base URL.
 *
 * @example
 * import { createProxy } from 'token-terminator/adapters/proxy';
 * const proxy = await createProxy({ flags: { upstream: 'https://api.openai.com' } });
 * const url = await proxy.listen(); // point OPENAI_BASE_URL at `${url}/v1`
 */
export { createProxy } from './server.js';
export type { Proxy, ProxyOptions, RouteHandler } from './server.js';
export type { ProxyLogRecord } from './context.js';
export type { ProxyMetrics } from './metrics.js';
export { sessionOf, tenantOf, SESSION_HEADER } from './request-identity.js';
export { TOKEN_HEADER } from './upstream.js';
export {
  loadProxyConfig,
  isLoopbackHost,
  processShare,
  PRIMARY_MEMORY_BYTES,
  PROXY_VARIABLES,
} from '../../src/config/proxy.js';
export type { ProxyConfig, ProxyFlags } from '../../src/config/proxy.js';
