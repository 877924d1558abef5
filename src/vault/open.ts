/**
 * `unavailableVault` stands in for a vault that could not be opened (either dialect): every
 * operation rejects with the open error, so the recovery tool answers it as a clear
 * `{code, message}` and status reports the vault unavailable; closing it is a no-op.
 */
import type { Vault } from './ports.js';

export function unavailableVault(path: string, error: Error): Vault {
  const fail = async (): Promise<never> => {
    throw error;
  };
  const close = async (): Promise<void> => undefined;
  return Object.freeze({
    path,
    engine: 'sqlite',
    readOnly: true,
    health: () => Object.freeze({ state: 'ok' as const }),
    put: fail,
    verify: fail,
    summary: fail,
    page: fail,
    read: fail,
    peek: fail,
    find: fail,
    search: fail,
    usage: fail,
    exposureAvailable: fail,
    claimExposure: fail,
    recordExposure: fail,
    deliver: fail,
    pin: fail,
    sessionPins: fail,
    closeSession: fail,
    getBaseline: fail,
    setBaseline: fail,
    getRendering: fail,
    setRendering: fail,
    setRenderings: fail,
    workingState: Object.freeze({ apply: fail, get: fail }),
    recordRequestMetric: fail,
    recordRequestMetrics: fail,
    metricsSummary: fail,
    requestMetricRows: fail,
    tokenCounts: fail,
    recordTokenCounts: fail,
    close,
    [Symbol.asyncDispose]: close,
  });
}
