/**
 * `GET /dashboard`: the report page rendered live from the store's metric rows, so every replica on
 * one PostgreSQL store shows the fleet's figures. Content-free like the report: numbers, mechanism
 * names and session ids. The chart library loads on the first request only, so a proxy that is never
 * asked for the page never pays for it. The gateway (`token-terminator proxy`) adds this route; the
 * proxy adapter itself does not import the report.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ProxyMetrics } from '../../adapters/proxy/metrics.js';
import type { Terminator } from '../runtime/types.js';
import { MissingPackageError } from '../optional-package.js';
import { errorLabel } from '../step.js';

/** Most metric rows one page draws (the newest ones). */
const ROWS = 10_000;

async function counterSum(
  counter: { get(): Promise<{ values: readonly { value: number; labels: Readonly<Record<string, unknown>> }[] }> },
  where?: (labels: Readonly<Record<string, unknown>>) => boolean,
): Promise<number> {
  const { values } = await counter.get();
  return values.filter((v) => where === undefined || where(v.labels)).reduce((n, v) => n + v.value, 0);
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
      const figures = await readStoreFigures(terminator.vault, ROWS);
      const withRecovery = {
        ...figures,
        recovery_calls: await counterSum(metrics.recoveryCalls),
        recovery_tokens: await counterSum(metrics.tokens, (l) => l['direction'] === 'recovery'),
      };
      const rateCard = rateCardFromConfig(terminator.config);
      html = renderReport(withRecovery, {
        title: 'token-terminator proxy',
        source: `the store\u2019s metric rows (the newest ${ROWS.toLocaleString('en-US')} requests of every replica on it); recovery calls and their tokens: this proxy since it started`,
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
