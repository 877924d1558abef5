/**
 * `GET /dashboard`: the report page rendered live from the store's metric rows, so every replica on
 * one PostgreSQL store shows the fleet's figures. Content-free like the report. The totals count every
 * client; the sessions listed are the caller's own (its tenant), named by their session-header name
 * (`unnamed session n` otherwise), so no client learns another's session ids. The chart library loads
 * on the first request only. The gateway adds this route; the proxy adapter does not import the report.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ProxyMetrics } from '../../adapters/proxy/metrics.js';
import { tenantOf } from '../../adapters/proxy/request-identity.js';
import type { ReportInput } from './figures.js';
import type { Terminator } from '../runtime/types.js';
import { MissingPackageError } from '../optional-package.js';
import { errorLabel, parseSessionStateKey } from '../step.js';

/** Most metric rows one page draws (the newest ones). */
const ROWS = 10_000;

async function counterSum(
  counter: { get(): Promise<{ values: readonly { value: number; labels: Readonly<Record<string, unknown>> }[] }> },
  where?: (labels: Readonly<Record<string, unknown>>) => boolean,
): Promise<number> {
  const { values } = await counter.get();
  return values.filter((v) => where === undefined || where(v.labels)).reduce((n, v) => n + v.value, 0);
}

/** A session id earlier releases gave a keyed tenant's named session (`h:<name>@<12 hex>`), stored without its tenant. */
const LEGACY_KEYED = /^h:.*@[0-9a-f]{12}$/;

/**
 * The figures with only `tenant`'s sessions listed, each by the name its client gave (the totals
 * still count every session). A session is the tenant's when its metric rows are keyed by it
 * (`sessionStateKey`); rows of earlier releases that named a keyed tenant's session are no one's.
 *
 * @example
 * ownSessions(await readStoreFigures(vault), tenantOf(req.headers));
 */
export function ownSessions(figures: ReportInput, tenant: string): ReportInput {
  let unnamed = 0;
  const sessions = figures.sessions.flatMap((s) => {
    const key = parseSessionStateKey(s.id);
    if (key.tenant !== tenant || (tenant === '' && LEGACY_KEYED.test(key.sessionId))) return [];
    const id = key.sessionId.startsWith('h:') ? key.sessionId.slice(2) : `unnamed session ${++unnamed}`;
    return [{ ...s, id }];
  });
  return { ...figures, session_count: figures.session_count ?? figures.sessions.length, sessions };
}

/**
 * The page for one request; a store that cannot be read is a 503 naming only the failure class.
 *
 * @example
 * import { createProxy } from 'token-terminator/adapters/proxy';
 * import { dashboardRoute } from 'token-terminator/report';
 * const proxy = await createProxy();
 * proxy.route('/dashboard', dashboardRoute(proxy.terminator, proxy.metrics));
 */
export function dashboardRoute(
  terminator: Terminator,
  metrics: ProxyMetrics,
): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  return async (req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' });
      res.end('GET /dashboard\n');
      return;
    }
    let html: string;
    try {
      const { rateCardFromConfig, readStoreFigures, renderReport } = await import('./index.js');
      const figures = ownSessions(await readStoreFigures(terminator.vault, ROWS), tenantOf(req.headers));
      const withRecovery = {
        ...figures,
        recovered_exact: await counterSum(metrics.recoveryResults, (l) => l['outcome'] === 'exact'),
        recovery_failures: await counterSum(metrics.recoveryResults, (l) => l['outcome'] === 'failed'),
        recovery_calls: await counterSum(metrics.recoveryCalls),
        recovery_tokens: await counterSum(metrics.tokens, (l) => l['direction'] === 'recovery'),
      };
      const rateCard = rateCardFromConfig(terminator.config);
      html = renderReport(withRecovery, {
        title: 'token-terminator proxy',
        source: `the store\u2019s metric rows (the newest ${ROWS.toLocaleString('en-US')} requests of every replica on it; the sessions listed are those of the API key this page was asked with); recovery calls, artifacts recovered and their tokens: this proxy since it started`,
        generatedAt: new Date().toISOString(),
        ...(rateCard === undefined ? {} : { rateCard }),
      });
    } catch (error) {
      res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(
        error instanceof MissingPackageError
          ? `token-terminator proxy: ${error.message}\n`
          : `token-terminator proxy: the dashboard could not read the store (${errorLabel(error)})\n`,
      );
      return;
    }
    const body = Buffer.from(html);
    res.writeHead(200, {
      'content-type': 'text/html; charset=utf-8',
      'content-length': body.length,
      'cache-control': 'no-store',
    });
    res.end(req.method === 'HEAD' ? undefined : body);
  };
}
